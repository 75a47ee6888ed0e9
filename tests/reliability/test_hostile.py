"""Hostile input over a raw socket (TLS-wrapped for the TLS variants) to a live
listener, on ours and on the stock comms.

distributed's listener writes its handshake message first and then reads one, so
the hostile bytes arrive as that read. Invalid input must get the connection
aborted (the raw peer sees EOF or a reset) and logged; the listener keeps serving
well-behaved clients; nothing is allocated on a claimed size.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.peers.conn import client_ssl_context, connect_args, roundtrip, serve
from tests.peers.hostile import (
    HUGE_CLAIMS,
    RawPeer,
    header,
    hostile_inputs,
    open_idle_sockets,
    socket_state,
)
from tests.peers.procs import ListenerProcess
from tests.peers.soak import soak_handler
from tests.reliability._util import REL, eventually, hygiene, params, security, tls_spec

#: How long an aborted connection may take to be seen as closed by the raw peer.
ABORT_WAIT = 10.0

#: Inputs the stock comm does not abort on (it keeps waiting for bytes that never
#: come, or leaves the connection open after failing): recorded as findings.
STOCK_OPEN = {
    # Stock reads `prefix` bytes before it looks at nframes; nframes 2^63 is only
    # 8 of the 16 bytes it waits for.
    "nframes-2^63": "stock tcp: reads `prefix` bytes before checking nframes; waits forever",
    "nframes-2^40": "stock tcp: reads `prefix` bytes before checking nframes; waits forever",
    "nframes-2^64-1": "stock tcp: reads `prefix` bytes before checking nframes; waits forever",
    # msgpack's loads of an empty frame list raises IndexError out of read() without
    # aborting; the listener task dies with the stream still open.
    "zero-frames": "stock tcp: IndexError in from_frames escapes read() and the "
                   "connection is left open (no abort)",
}
#: Bounded wait for the inputs the stock comm is known to leave open (strict xfail).
OPEN_WAIT = 1.0


def _cases() -> list:
    out = []
    for h in hostile_inputs():
        for v in REL:
            marks = []
            reason = STOCK_OPEN.get(h.name) if not v.ours else None
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            out.append(pytest.param(h, v, id=f"{v.name}-{h.name}", marks=marks))
    return out


def _ssl(variant, certs):
    return client_ssl_context(certs.security()) if variant.tls else None


@pytest.mark.parametrize("hostile, variant", _cases())
async def test_hostile_input(hostile, variant, certs) -> None:
    sec = security(variant, certs)
    async with hygiene() as logs:
        async with serve(variant.scheme, soak_handler, sec) as listener:
            addr = listener.contact_address
            await roundtrip(addr, connect_args(sec), n=1)
            logs.mark_fds()
            peer = await RawPeer.open(addr, _ssl(variant, certs))
            try:
                await peer.send(hostile.data)
                if hostile.invalid:
                    stays_open = not variant.ours and hostile.name in STOCK_OPEN
                    wait = OPEN_WAIT if stays_open else ABORT_WAIT
                    state = await peer.wait_closed_by_peer(wait)
                    assert state in ("eof", "reset"), f"connection still {state} after {wait} s"
                elif not variant.tls:
                    peer.shutdown_write()  # the stream ends mid-message: clean FIN
                    state = await peer.wait_closed_by_peer(ABORT_WAIT)
                    assert state in ("eof", "reset"), f"connection still {state}"
                else:
                    # TLS has no half-close: the stream ends with the connection
                    await peer.close()
                    if variant.ours:
                        await eventually(lambda: "closed before handshake" in logs.text(),
                                         ABORT_WAIT)
            finally:
                await peer.close()
            # still serving, at once
            await roundtrip(addr, connect_args(sec))
        if variant.ours:
            text = logs.text()
            if hostile.invalid:
                # the transport names the reason (distributed.comm.asyncio.protocol, WARNING)
                assert any(
                    r.name.startswith("distributed.comm.asyncio") and r.levelno >= logging.WARNING
                    and "Aborting" in r.getMessage()
                    and any(w in r.getMessage() for w in ("malformed header", "exceeds the bound"))
                    for r in logs.records
                ), text
            else:
                assert "closed before handshake completed" in text, text


@pytest.mark.parametrize("variant", params(REL))
async def test_slowloris(variant, certs, loop_name) -> None:
    """One byte every 0.15 s of a header claiming 2^63 bytes: other clients are
    served meanwhile, and the peer is dropped once the claim is readable."""
    sec = security(variant, certs)
    data = header(2**63, [8])[:16]
    async with hygiene() as h:
        async with serve(variant.scheme, soak_handler, sec) as listener:
            addr = listener.contact_address
            await roundtrip(addr, connect_args(sec), n=1)
            h.mark_fds()
            peer = await RawPeer.open(addr, _ssl(variant, certs))
            try:
                trickle = asyncio.ensure_future(peer.trickle(data, 0.15))
                served = 0
                while not trickle.done():  # bounded: the trickle takes 16 * 0.15 s
                    await roundtrip(addr, connect_args(sec), n=1)
                    served += 1
                await trickle
                state = await peer.wait_closed_by_peer(ABORT_WAIT)
            finally:
                await peer.close()
            assert served >= 3, served
            assert state in ("eof", "reset"), state
            await roundtrip(addr, connect_args(sec))


IDLE = 200


@pytest.mark.parametrize("variant", params(REL))
async def test_idle_half_open_connections(variant, certs) -> None:
    """IDLE connections that never send a byte (raw TCP, also to TLS listeners)
    do not stop the listener from serving; once they go away, so do the server's
    descriptors."""
    sec = security(variant, certs)
    async with hygiene() as h:
        async with serve(variant.scheme, soak_handler, sec) as listener:
            addr = listener.contact_address
            await roundtrip(addr, connect_args(sec))
            h.mark_fds()
            socks = open_idle_sockets(addr, IDLE)
            try:
                await asyncio.gather(*(roundtrip(addr, connect_args(sec)) for _ in range(5)))
                # None of them was dropped yet: sending nothing is not invalid (the
                # TLS handshake timeout is 30 s by default).
                states = [socket_state(s) for s in socks]
                assert states.count("open") == IDLE, states
            finally:
                for s in socks:
                    s.close()
            await roundtrip(addr, connect_args(sec))


CLAIM_RSS_BOUND = 64 << 20


@pytest.mark.parametrize("variant", params(REL))
async def test_huge_claims_peak_rss(variant, certs, loop_name) -> None:
    """Claims of 2^40..2^63 bytes (prefix, frame count, frame sizes), 10 of each
    at once: the listener process's peak RSS grows by less than 64 MiB."""
    with ListenerProcess(variant.scheme, loop_name, tls_spec(variant, certs)) as server:
        sec = security(variant, certs)
        await roundtrip(server.address, connect_args(sec))
        base = server.status()
        assert server.reset_peak()
        inputs = [h for h in HUGE_CLAIMS if variant.ours or h.name not in STOCK_OPEN]
        peers = [await RawPeer.open(server.address, _ssl(variant, certs))
                 for _ in inputs for _ in range(10)]
        try:
            for i, p in enumerate(peers):
                await p.send(inputs[i // 10].data)
            states = await asyncio.gather(*(p.wait_closed_by_peer(ABORT_WAIT) for p in peers))
        finally:
            for p in peers:
                await p.close()
        await roundtrip(server.address, connect_args(sec))
        after = server.status()
        assert server.alive()
        growth = after["VmHWM"] - base["VmRSS"]
        print(f"{variant.name}: {len(peers)} huge claims, peak RSS {base['VmRSS']>>20} -> "
              f"{after['VmHWM']>>20} MiB; VmPeak {base['VmPeak']>>20} -> {after['VmPeak']>>20} MiB")
        assert set(states) <= {"eof", "reset"}, states
        assert growth < CLAIM_RSS_BOUND, growth

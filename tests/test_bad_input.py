"""Hostile or broken input from a raw socket against a live ``asyncio://`` listener.

distributed's listener speaks first (its handshake message) and then reads the
peer's handshake, so bad bytes sent right after connecting are that first read.
The "message" phase sends a correct handshake first and the bad bytes after it, so
they reach a comm that the handler is reading from. In every case: that connection
is aborted (the raw socket sees EOF or a reset), a clear error is logged or
raised, and a well-behaved client still round-trips afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random

import dask
import psutil
import pytest
from distributed.comm import connect
from distributed.comm.core import CommClosedError

from tests.helpers_net import WAIT, RawPeer, header, roundtrip
from tests.variants import VARIANTS, echo, serve

ASYNCIO = next(v for v in VARIANTS if v.name == "asyncio")

#: (id, bytes, text the aborting log line / error must contain)
PROTOCOL_ERRORS = [
    ("random-bytes", random.Random(0).randbytes(4096), "malformed header"),
    ("http-request", b"GET / HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
     "malformed header"),
    ("prefix-2**63", header(2**63, [8]) + b"x" * 8, "prefix"),
    ("nframes-2**63", (16).to_bytes(8, "little") + (2**63).to_bytes(8, "little"),
     "frames exceed the bound"),
    ("nframes-2**64-1", (16).to_bytes(8, "little") + (2**64 - 1).to_bytes(8, "little"),
     "frames exceed the bound"),
    ("zero-frames", header(8, []), "zero frames"),
    ("frame-size-2**63", header(16, [2**63]), "exceeds the bound"),
    ("frame-sizes-sum-2**64", header(24, [2**63, 2**63]), "exceeds the bound"),
    ("frame-size-2**40", header(16, [2**40]) + b"z" * 1000, "exceeds the bound"),
    ("prefix-mid-frame", header(24 + 5, [10, 10]) + b"a" * 20, "frame boundary"),
]  # fmt: skip

#: Streams that simply stop (then a clean close) in the middle of a message.
TRUNCATED = [
    ("header-mid-field", header(21, [5])[:12]),
    ("header-mid-lengths", header(32, [5, 6, 7])[:30]),
    ("mid-small-frame", header(16, [1000]) + b"f" * 500),
    ("mid-large-frame", header(16, [4 << 20]) + b"F" * (1 << 20)),
]


@pytest.fixture
def caplog_info(caplog):
    caplog.set_level(logging.INFO, logger="distributed.comm.asyncio")
    return caplog


async def _serve_with_sink(handler_errors: asyncio.Queue):
    async def handler(comm) -> None:
        try:
            while True:
                msg = await comm.read()
                await comm.write(msg)
        except BaseException as e:
            handler_errors.put_nowait(e)
        finally:
            comm.abort()

    return serve(ASYNCIO, None, handler)


async def _refused_after_handshake(address: str, data: bytes) -> None:
    """A raw peer completes the handshake, sends ``data`` and is refused."""
    peer = RawPeer.connect(address)
    try:
        await peer.handshake()
        await peer.send(data)
        assert await peer.wait_closed_by_peer() in ("eof", "reset")
    finally:
        peer.close()


@pytest.mark.parametrize("phase", ["handshake", "message"])
@pytest.mark.parametrize(
    "data, expected", [pytest.param(d, e, id=i) for i, d, e in PROTOCOL_ERRORS]
)
async def test_protocol_error_aborts_connection(data, expected, phase, caplog_info) -> None:
    errors: asyncio.Queue = asyncio.Queue()
    async with await _serve_with_sink(errors) as listener:
        peer = RawPeer.connect(listener.contact_address)
        try:
            if phase == "message":
                theirs = await peer.handshake()
                assert "pickle-protocol" in theirs
            await peer.send(data)
            assert await peer.wait_closed_by_peer() in ("eof", "reset")
        finally:
            peer.close()
        if phase == "message":
            err = await asyncio.wait_for(errors.get(), WAIT)
            assert isinstance(err, CommClosedError), repr(err)
            assert "protocol error" in str(err) and expected in str(err), str(err)
        # The transport names the reason before aborting.
        logged = [r for r in caplog_info.records if r.name == "distributed.comm.asyncio.protocol"]
        assert any(
            r.levelno >= logging.WARNING and "Aborting" in r.getMessage()
            and expected in r.getMessage()
            for r in logged
        ), caplog_info.text
        await roundtrip(ASYNCIO, None, listener.contact_address)


@pytest.mark.parametrize("phase", ["handshake", "message"])
@pytest.mark.parametrize("data", [pytest.param(d, id=i) for i, d in TRUNCATED])
async def test_truncated_stream_aborts_connection(data, phase, caplog_info) -> None:
    errors: asyncio.Queue = asyncio.Queue()
    async with await _serve_with_sink(errors) as listener:
        peer = RawPeer.connect(listener.contact_address)
        try:
            if phase == "message":
                await peer.handshake()
            await peer.send(data)
            peer.shutdown_write()  # a clean FIN in the middle of the message
            assert await peer.wait_closed_by_peer() in ("eof", "reset")
        finally:
            peer.close()
        if phase == "message":
            err = await asyncio.wait_for(errors.get(), WAIT)
            assert isinstance(err, CommClosedError), repr(err)
            assert "in the middle of a message" in str(err), str(err)
        else:
            # distributed's handshake failed; the listener says so, naming the peer.
            assert any(
                "closed before handshake completed" in r.getMessage()
                for r in caplog_info.records
                if r.name == "distributed.comm.asyncio.listener"
            ), caplog_info.text
        await roundtrip(ASYNCIO, None, listener.contact_address)


async def test_many_bad_peers_at_once_do_not_disturb_good_ones(caplog_info) -> None:
    async with serve(ASYNCIO, None, echo) as listener:
        peers = [RawPeer.connect(listener.contact_address) for _ in range(20)]
        try:
            good = asyncio.ensure_future(
                asyncio.gather(*(roundtrip(ASYNCIO, None, listener.contact_address)
                                 for _ in range(5)))
            )  # fmt: skip
            for i, peer in enumerate(peers):
                await peer.send(PROTOCOL_ERRORS[i % len(PROTOCOL_ERRORS)][1])
            results = await asyncio.wait_for(
                asyncio.gather(*(p.wait_closed_by_peer() for p in peers)), WAIT
            )
            assert set(results) <= {"eof", "reset"}
            await asyncio.wait_for(good, WAIT)
        finally:
            for p in peers:
                p.close()


async def test_claim_beyond_configured_max_message_is_refused(caplog_info) -> None:
    """With max-message at 1 MiB, a 2 MiB frame (fine by default) and a 2**40-byte
    frame are refused from their header alone."""
    with dask.config.set({"distributed.comm.asyncio.max-message": "1MiB"}):
        errors: asyncio.Queue = asyncio.Queue()
        async with await _serve_with_sink(errors) as listener:
            for size in (2 << 20, 2**40):
                await _refused_after_handshake(listener.contact_address, header(16, [size]))
                err = await asyncio.wait_for(errors.get(), WAIT)
                assert f"message of {size} bytes exceeds the bound of 1048576" in str(err)
            # Messages below the bound still pass.
            await roundtrip(ASYNCIO, None, listener.contact_address)


async def test_claim_beyond_configured_max_frames_is_refused(caplog_info) -> None:
    with dask.config.set({"distributed.comm.asyncio.max-frames": 100}):
        errors: asyncio.Queue = asyncio.Queue()
        async with await _serve_with_sink(errors) as listener:
            await _refused_after_handshake(listener.contact_address,
                                           header(8 + 8 * 101, [1] * 101) + b"x" * 101)
            err = await asyncio.wait_for(errors.get(), WAIT)
            assert "101 frames exceed the bound of 100" in str(err), str(err)
            await roundtrip(ASYNCIO, None, listener.contact_address)


def _rss() -> int:
    return psutil.Process(os.getpid()).memory_info().rss


async def test_refused_claims_allocate_nothing(caplog_info) -> None:
    """Claims far beyond the bounds are refused before any allocation: RSS does not
    move by anything near the claimed size (1 TiB, or 2**63)."""
    async with serve(ASYNCIO, None) as listener:
        before = _rss()
        for data in (header(16, [2**40]), header(16, [2**62, 2**62]),
                     header(2**40, [2**40 - 16])):  # fmt: skip
            await _refused_after_handshake(listener.contact_address, data)
        assert _rss() - before < 256 << 20
        await roundtrip(ASYNCIO, None, listener.contact_address)


async def test_accepted_claim_does_not_commit_claimed_memory(caplog_info) -> None:
    """A large claim within the default bounds gets its own (uninitialised) buffer,
    never a zero-filled one: holding a connection that claimed 4 GiB and sent 1 MiB
    does not raise RSS by anything near 4 GiB."""
    from distributed.system import MEMORY_LIMIT

    claim = min(4 << 30, int(MEMORY_LIMIT) // 2)
    sent = 1 << 20
    comms: asyncio.Queue = asyncio.Queue()
    errors: asyncio.Queue = asyncio.Queue()

    async def handler(comm) -> None:
        comms.put_nowait(comm)
        try:
            while True:
                await comm.write(await comm.read())
        except BaseException as e:
            errors.put_nowait(e)
        finally:
            comm.abort()

    async with serve(ASYNCIO, None, handler) as listener:
        peer = RawPeer.connect(listener.contact_address)
        try:
            await peer.handshake()
            before = _rss()
            await peer.send(header(16, [claim]) + b"D" * sent)
            comm = await asyncio.wait_for(comms.get(), WAIT)
            decoder = comm._protocol._decoder
            for _ in range(int(WAIT / 0.01)):
                if decoder.buffered_partial >= sent:
                    break
                await asyncio.sleep(0.01)
            assert decoder.buffered_partial == sent
            grown = _rss() - before
            assert grown < claim // 4, f"RSS grew by {grown} bytes for a {claim}-byte claim"
            peer.shutdown_write()
            assert await peer.wait_closed_by_peer() in ("eof", "reset")
        finally:
            peer.close()
        err = await asyncio.wait_for(errors.get(), WAIT)
        assert f"({sent} bytes of it received)" in str(err), str(err)
        del comm, decoder
        await roundtrip(ASYNCIO, None, listener.contact_address)


async def test_a_refused_peer_leaves_no_reference_cycle(caplog_info) -> None:
    """The reason a refused connection ended is kept without the traceback
    whose frames refer back to the protocol: with the collector off, the
    protocol is freed by reference counting alone once its transport is gone,
    and no cycle holds its receive buffer (memoryviews and their exporter,
    which CPython's collector cannot clear in one cycle)."""
    import gc
    import types
    import weakref

    protocols: asyncio.Queue = asyncio.Queue()
    errors: asyncio.Queue = asyncio.Queue()

    async def handler(comm) -> None:
        protocols.put_nowait(weakref.ref(comm._protocol))
        try:
            await comm.read()
        except BaseException as e:
            errors.put_nowait(type(e))
        finally:
            comm.abort()

    async with serve(ASYNCIO, None, handler) as listener:
        comm = await connect(listener.contact_address)  # warm-up: first-use caches
        await comm.close()
        await asyncio.wait_for(errors.get(), WAIT)
        await asyncio.wait_for(protocols.get(), WAIT)
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            refs = []
            for _, data, _ in PROTOCOL_ERRORS[:6]:
                await _refused_after_handshake(listener.contact_address, data)
                assert await asyncio.wait_for(errors.get(), WAIT) is CommClosedError
                refs.append(await asyncio.wait_for(protocols.get(), WAIT))
            # Freed once the transport lets go (after the protocol-error grace).
            for _ in range(int(WAIT / 0.05)):
                if not any(r() is not None for r in refs):
                    break
                await asyncio.sleep(0.05)
            alive = sum(r() is not None for r in refs)
            gc.collect()
            kept = [o for o in gc.garbage
                    if isinstance(o, (BaseException, types.TracebackType, types.FrameType,
                                      memoryview))]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        assert alive == 0 and not kept, (alive, kept[:10])

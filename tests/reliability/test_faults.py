"""Faults: peers killed mid-message, resets, close with queued writes, a listener
stopped mid-handshake, a TLS peer that never finishes its handshake, and
descriptor leaks over connect/close cycles. Every wait is bounded; each scenario
runs under :func:`tests.reliability._util.hygiene` (no pending task destroyed, no
ResourceWarning, no leaked descriptor)."""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
import struct

import dask
import numpy as np
import pytest
from distributed.comm import connect
from distributed.comm.core import CommClosedError
from distributed.protocol import to_serialize

from tests.peers.conn import connect_args, connect_close_cycles, roundtrip, serve
from tests.peers.hostile import open_idle_sockets, socket_state
from tests.peers.procs import PeerProcess, fd_count
from tests.peers.soak import check_message, make_message, soak_handler
from tests.reliability._util import REL, TLS, eventually, hygiene, params, security, tls_spec
from tests.variants import raw_socket

BOUND = 20.0  # any error must surface within this


async def _warm(addr: str, sec, echo: bool = False) -> None:
    """Open what the loop opens lazily (executor, uvloop's wake-up pair): one
    connection that writes a ping (and reads its echo with ``echo``), then closes."""
    await asyncio.get_running_loop().run_in_executor(None, lambda: None)
    if echo:
        await roundtrip(addr, connect_args(sec), n=1)
        return
    comm = await connect(addr, timeout=BOUND, **connect_args(sec))
    await comm.write({"op": "ping"})
    await asyncio.wait_for(comm.close(), BOUND)


@pytest.mark.parametrize("variant", params(REL))
async def test_peer_killed_while_writing(variant, certs, loop_name) -> None:
    """A peer process writing 32 MiB messages back to back is SIGKILLed: our read
    raises CommClosedError, no hang."""
    sec = security(variant, certs)
    errors: asyncio.Queue = asyncio.Queue()

    async def handler(comm) -> None:
        try:
            while True:
                await comm.read()
        except BaseException as e:
            errors.put_nowait(e)
        finally:
            comm.abort()

    async with hygiene() as h:
        async with serve(variant.scheme, handler, sec) as listener:
            await _warm(listener.contact_address, sec)
            await asyncio.wait_for(errors.get(), BOUND)  # the warm-up's own end
            h.mark_fds()
            peer = PeerProcess("write", listener.contact_address, loop_name,
                               tls_spec(variant, certs))
            try:
                assert await peer.wait_ready() == "ready"
                await asyncio.sleep(random.Random(1).uniform(0.01, 0.05))
                peer.kill()
                err = await asyncio.wait_for(errors.get(), BOUND)
            finally:
                peer.close()
            assert isinstance(err, CommClosedError), repr(err)
            # and the listener still takes connections
            await _warm(listener.contact_address, sec)
            await asyncio.wait_for(errors.get(), BOUND)


@pytest.mark.parametrize("variant", params(REL))
async def test_peer_killed_while_reading(variant, certs, loop_name) -> None:
    """We write 32 MiB messages back to back to a peer process that is SIGKILLed
    while reading: our write raises CommClosedError, no hang."""
    sec = security(variant, certs)
    errors: asyncio.Queue = asyncio.Queue()
    big = np.ones(32 << 20, dtype="u1")

    async def handler(comm) -> None:
        try:
            msg = await comm.read()
            if msg.get("op") == "ping":
                await comm.write(msg)
                await comm.read()
            for i in range(10_000):  # bounded; the peer dies long before
                await comm.write({"i": i, "data": to_serialize(big)})
        except BaseException as e:
            errors.put_nowait(e)
        finally:
            comm.abort()

    async with hygiene() as h:
        async with serve(variant.scheme, handler, sec) as listener:
            await _warm(listener.contact_address, sec)
            await asyncio.wait_for(errors.get(), BOUND)
            h.mark_fds()
            peer = PeerProcess("read", listener.contact_address, loop_name,
                               tls_spec(variant, certs))
            try:
                assert await peer.wait_ready() == "ready"
                peer.kill()
                err = await asyncio.wait_for(errors.get(), BOUND)
            finally:
                peer.close()
            assert isinstance(err, CommClosedError), repr(err)


@pytest.mark.parametrize("variant", params(REL))
async def test_reset_during_large_write(variant, certs) -> None:
    """The peer closes with SO_LINGER 0 (a TCP reset) while we write a 64 MiB
    message: the write raises CommClosedError."""
    sec = security(variant, certs)
    errors: asyncio.Queue = asyncio.Queue()
    started = asyncio.Event()
    big = np.ones(64 << 20, dtype="u1")

    async def handler(comm) -> None:
        try:
            msg = await comm.read()
            if msg.get("op") == "ping":
                await comm.write(msg)
                await comm.read()
            for i in range(1000):
                started.set()
                await comm.write({"i": i, "data": to_serialize(big)})
        except BaseException as e:
            errors.put_nowait(e)
        finally:
            comm.abort()

    async with hygiene() as h:
        async with serve(variant.scheme, handler, sec) as listener:
            await _warm(listener.contact_address, sec)
            await asyncio.wait_for(errors.get(), BOUND)
            h.mark_fds()
            comm = await connect(listener.contact_address, timeout=BOUND, **connect_args(sec))
            try:
                await comm.write({"op": "go"})
                await asyncio.wait_for(started.wait(), BOUND)
                await asyncio.sleep(0.02)
                raw_socket(comm).setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            finally:
                comm.abort()
            err = await asyncio.wait_for(errors.get(), BOUND)
            assert isinstance(err, CommClosedError), repr(err)


@pytest.mark.parametrize("variant", params(REL))
async def test_close_with_queued_writes_delivers_everything(variant, certs) -> None:
    """With a 4 KiB SO_SNDBUF and a peer that starts reading only later, 24
    messages (up to 4 MiB) written and then closed at once all arrive intact."""
    sec = security(variant, certs)
    n = 24
    received: asyncio.Queue = asyncio.Queue()
    written = asyncio.Event()  # every message written: the peer may start reading
    comms = 0

    async def handler(comm) -> None:
        nonlocal comms
        comms += 1
        got, problems = 0, []
        try:
            if comms > 1:  # not the warm-up's comm: read once everything is written
                await asyncio.wait_for(written.wait(), BOUND)
            while True:
                msg = await comm.read()
                if msg.get("op") == "ping":
                    continue
                problem = check_message(msg, got, 0)
                if problem:
                    problems.append(problem)
                got += 1
        except CommClosedError:
            pass
        finally:
            comm.abort()
            received.put_nowait((got, problems))

    async with hygiene() as h:
        async with serve(variant.scheme, handler, sec) as listener:
            await _warm(listener.contact_address, sec)
            await asyncio.wait_for(received.get(), BOUND)  # the warm-up's
            h.mark_fds()
            comm = await connect(listener.contact_address, timeout=BOUND, **connect_args(sec))
            raw_socket(comm).setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            rng = random.Random(3)
            for seq in range(n):
                await asyncio.wait_for(comm.write(make_message(seq, 0, rng, 4 << 20)), BOUND)
            written.set()  # the reader starts in a later loop iteration than this close()
            await asyncio.wait_for(comm.close(), BOUND)
            got, problems = await asyncio.wait_for(received.get(), BOUND)
            assert problems == []
            assert got == n


@pytest.mark.parametrize("variant", params(REL))
async def test_listener_stopped_during_handshakes(variant, certs) -> None:
    """40 clients connect while the listener stops: each either gets a comm or an
    error within the (3 s) connect timeout; none hangs."""
    sec = security(variant, certs)
    with dask.config.set({"distributed.comm.timeouts.connect": "3s"}):
        async with hygiene() as h:
            comms = []
            async with serve(variant.scheme, soak_handler, sec) as listener:
                addr = listener.contact_address
                await _warm(addr, sec, echo=True)
                h.mark_fds()
                tasks = [asyncio.ensure_future(connect(addr, **connect_args(sec)))
                         for _ in range(40)]
                await asyncio.sleep(0.005)
            # stopped here, with handshakes in flight
            done, pending = await asyncio.wait(tasks, timeout=BOUND)
            assert not pending, f"{len(pending)} connects hang"
            outcomes = {"comm": 0, "error": 0}
            for t in done:
                exc = t.exception()
                if exc is None:
                    outcomes["comm"] += 1
                    comms.append(t.result())
                else:
                    assert isinstance(exc, OSError), repr(exc)  # CommClosedError too
                    outcomes["error"] += 1
            for c in comms:
                c.abort()
            print(outcomes)


@pytest.mark.parametrize("variant", params(TLS, xfail={
    "stock-tls": "stock tls: the listener awaits stream.wait_for_handshake() without "
                 "any time-out; a TLS peer that never finishes stays forever",
}))
async def test_tls_handshake_never_completed(variant, certs) -> None:
    """Raw TCP peers that send nothing, or half a ClientHello, to a TLS listener
    are dropped within distributed.comm.timeouts.connect (2 s here)."""
    sec = security(variant, certs)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    ctx = sec.get_connection_args("client")["ssl_context"]
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    hello = outgoing.read()
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        async with hygiene() as h:
            async with serve(variant.scheme, soak_handler, sec) as listener:
                addr = listener.contact_address
                await _warm(addr, sec, echo=True)
                h.mark_fds()
                socks = open_idle_sockets(addr, 4)
                try:
                    socks[1].send(hello[: len(hello) // 2])
                    socks[2].send(hello[:3])
                    socks[3].send(hello)  # a full ClientHello, then silence
                    await roundtrip(addr, connect_args(sec))
                    assert await eventually(
                        lambda: all(socket_state(s) in ("eof", "reset") for s in socks), 8
                    ), [socket_state(s) for s in socks]
                finally:
                    for s in socks:
                        s.close()
                await roundtrip(addr, connect_args(sec))


CYCLES = {"asyncio": 1000, "stock-tcp": 1000, "asyncio+tls": 300, "stock-tls": 300}


@pytest.mark.parametrize("variant", params(REL))
async def test_connect_close_cycles_leak_no_fd(variant, certs) -> None:
    """Many connect / handshake / ping / close cycles: the descriptor count
    (client and listener are both in this process) returns to where it was."""
    sec = security(variant, certs)
    n = CYCLES[variant.name]
    async with hygiene() as h:
        async with serve(variant.scheme, soak_handler, sec) as listener:
            await _warm(listener.contact_address, sec, echo=True)
            h.mark_fds()
            before = fd_count()
            done = await connect_close_cycles(listener.contact_address, connect_args(sec), n,
                                              concurrency=8, deadline=120)
            assert done == n
            assert await eventually(lambda: fd_count() <= before, 10), fd_count() - before

"""Backpressure in both directions, over real sockets, for asyncio and asyncio+tls.

Waits are bounded by count and time; "blocked" is observed as a write task that
stays pending while nothing moves, never as a duration.
"""

from __future__ import annotations

import asyncio
import socket

import dask
import numpy as np
import pytest
from distributed.protocol import to_serialize

from asynciocomm.reading import FLOW
from asynciocomm.transport_traits import WRITE_CHUNK
from tests.helpers_net import WAIT, write_spy
from tests.variants import OWN, connect_to, raw_socket, serve, variant_fixture

MiB = 1 << 20
variant = variant_fixture(OWN)


def _msg(i: int, size: int = MiB) -> dict:
    return {"i": i, "data": to_serialize(np.full(size, i % 251, dtype="u1"))}


def _check(msg: dict, i: int, size: int = MiB) -> None:
    assert msg["i"] == i
    data = msg["data"]
    assert data.nbytes == size and data[0] == i % 251 and data[-1] == i % 251


def _offloaded_msg(i: int, size: int) -> dict:
    """A message whose array distributed deserializes in its offload thread
    above the threshold: it pickles the array's (structured) dtype."""
    data = np.zeros(size, dtype=[("b", "u1")])
    data["b"] = i % 251
    return {"i": i, "data": to_serialize(data)}


def _check_offloaded(msg: dict, i: int, size: int) -> None:
    assert msg["i"] == i
    data = msg["data"]["b"]
    assert data.nbytes == size and data[0] == i % 251 and data[-1] == i % 251


async def _until_a_writer_waits(comm, task: asyncio.Future) -> None:
    """Wait for the event "a write of ``comm`` waits its turn" (its sender holds a
    waiter: the buffers between the two ends are full), or for ``task`` to end;
    bounded by WAIT."""
    sender = comm._protocol._sender
    for _ in range(int(WAIT / 0.01)):
        if sender._waiters or task.done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no write ever waited")


async def test_write_blocks_on_a_peer_that_does_not_read(variant, certs) -> None:
    """The peer accepts the connection but does not read: ``comm.write`` of many
    1 MiB messages blocks once the buffers between the two are full, and completes
    when the peer reads."""
    n = 64
    go = asyncio.Event()
    all_received = asyncio.Event()
    received: list[dict] = []
    server_comm: asyncio.Future = asyncio.get_running_loop().create_future()

    async def handler(comm) -> None:
        # A fixed receive buffer: no autotuning (tcp_rmem may allow 32 MiB).
        raw_socket(comm).setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
        server_comm.set_result(comm)
        await go.wait()
        for _ in range(n):
            received.append(await comm.read())
        all_received.set()
        await comm.close()

    # The reader's own read-pause bound stops it from buffering everything
    # in user space, so the backpressure reaches the sender.
    with dask.config.set({"distributed.comm.asyncio.read-pause": "2MiB"}):
        async with serve(variant, certs, handler) as listener:
            comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
            raw_socket(comm).setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
            sent = 0

            async def writer() -> None:
                nonlocal sent
                for i in range(n):
                    await comm.write(_msg(i))
                    sent += 1

            task = asyncio.ensure_future(writer())
            try:
                await asyncio.wait_for(server_comm, WAIT)
                await _until_a_writer_waits(comm, task)
                assert not task.done(), "64 MiB went into a peer that does not read"
                assert sent < n
                assert comm._protocol._sender._paused
                go.set()
                await asyncio.wait_for(task, WAIT)
                await asyncio.wait_for(all_received.wait(), WAIT)
                assert len(received) == n
                for i, msg in enumerate(received):
                    _check(msg, i)
            finally:
                task.cancel()
                await comm.close()


@pytest.mark.parametrize(
    "size, n, read_pause",
    [pytest.param(MiB, 64, 4 * MiB, id="1MiB-messages"),
     pytest.param(16 * 1024, 3000, MiB, id="16KiB-messages")],
)  # fmt: skip
async def test_read_pauses_when_unread_messages_exceed_the_bound(
    variant, certs, size, n, read_pause
) -> None:
    """The sender floods, the receiver does not read: its protocol pauses reading
    with at most about ``read-pause`` bytes queued, the sender blocks, and as
    messages are consumed reading resumes and every message arrives in order."""
    server_comm: asyncio.Future = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def handler(comm) -> None:
        raw_socket(comm).setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
        server_comm.set_result(comm)
        await done.wait()  # the test reads from this comm itself

    with dask.config.set({"distributed.comm.asyncio.read-pause": read_pause}):
        async with serve(variant, certs, handler) as listener:
            comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
            raw_socket(comm).setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
            receiver = await asyncio.wait_for(server_comm, WAIT)
            protocol = receiver._protocol
            decoder = protocol._decoder
            # Plus what one receive can complete before the check: a read buffer's
            # worth of small messages, or the one large message that crossed it.
            bound = read_pause + protocol.settings.read_buffer + size + 4096

            async def writer() -> None:
                for i in range(n):
                    await comm.write(_msg(i, size))

            task = asyncio.ensure_future(writer())
            try:
                for _ in range(int(WAIT / 0.02)):
                    if protocol._reading.held(FLOW):
                        break
                    await asyncio.sleep(0.02)
                assert protocol._reading.held(FLOW)
                await _until_a_writer_waits(comm, task)
                assert not task.done(), "the sender was never held back"
                assert protocol._reading.held(FLOW)
                # It kept receiving up to the bound though nobody read.
                assert read_pause < decoder.queued_bytes <= bound, decoder.queued_bytes

                resumed = False
                for i in range(n):
                    assert decoder.queued_bytes <= bound
                    _check(await asyncio.wait_for(receiver.read(), WAIT), i, size)
                    resumed = resumed or not protocol._reading.held(FLOW)
                assert resumed
                await asyncio.wait_for(task, WAIT)
                assert not protocol._reading.held(FLOW)
                assert decoder.queued_bytes == 0
            finally:
                task.cancel()
                await comm.close()
                receiver.abort()
                done.set()


def _socket_transport(transport: asyncio.BaseTransport) -> asyncio.BaseTransport:
    """The socket transport under a TLS transport (asyncio's sslproto), or itself."""
    ssl_protocol = getattr(transport, "_ssl_protocol", None)
    return ssl_protocol._transport if ssl_protocol is not None else transport


async def test_large_write_is_handed_over_in_chunks_where_transports_copy(
    variant, certs
) -> None:
    """Where a transport would copy or encrypt a whole large write before sending
    it (asyncio's socket transport; any TLS transport), a 48 MiB message reaches
    it one chunk at a time, over TLS in smaller chunks. On the plain asyncio loop
    the socket transport's own buffer never holds much more than one chunk.
    Every byte arrives."""
    loop = asyncio.get_running_loop()
    uvloop = type(loop).__module__.startswith("uvloop")
    if uvloop and not variant.tls:
        pytest.skip("uvloop's socket transport writes buffers by reference")
    size = 48 * MiB
    got: asyncio.Future = loop.create_future()

    async def handler(comm) -> None:
        got.set_result(await comm.read())
        await comm.close()

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        sock_transport = _socket_transport(comm._protocol.transport)
        peak = 0

        def sample() -> None:
            nonlocal peak
            peak = max(peak, sock_transport.get_write_buffer_size())
            if not got.done():
                loop.call_soon(sample)

        with write_spy(comm) as spy:
            sample()
            await asyncio.wait_for(comm.write(_msg(7, size)), WAIT)
            _check(await asyncio.wait_for(got, WAIT), 7, size)
        await comm.close()
    chunk = WRITE_CHUNK
    assert sum(spy.sizes) > size and max(spy.sizes) <= chunk, spy.sizes
    if not uvloop:
        assert 0 < peak <= WRITE_CHUNK + 256 * 1024, peak


async def test_a_message_in_the_offload_thread_still_holds_reading_back(
    variant, certs, monkeypatch, tls_reads_past_pause
) -> None:
    """Messages larger than ``read-pause`` and than distributed's live offload
    threshold, so each is deserialized in the offload thread, are read in the
    usual loop, ``msg = await comm.read()``, which holds the previous message
    until the next one is returned. A message counts as unread until read()
    returns it, so no third frame is received meanwhile: with a buffer pool of
    two frames, every frame after the first two reuses a pooled block, and every
    message arrives intact. (The arrays are of a structured dtype: a plain
    array is read without the offload thread.)"""
    import distributed.comm.utils

    from asynciocomm.pool import shared_pool

    size, n = 4 * MiB, 12
    monkeypatch.setattr(distributed.comm.utils, "OFFLOAD_THRESHOLD", MiB)
    settings = {
        "distributed.comm.asyncio.read-pause": "2MiB",
        # Two 4 MiB frames, not three; a setting of its own, so a pool of its own.
        "distributed.comm.asyncio.buffer-pool": "10MiB",
        "distributed.comm.asyncio.buffer-pool-min-size": "1MiB",
        "distributed.comm.asyncio.buffer-pool-idle": "1h",
    }
    got: asyncio.Future = asyncio.get_running_loop().create_future()

    async def handler(comm) -> None:
        s = comm._protocol.settings
        pool = shared_pool(s.buffer_pool, s.buffer_pool_min_size, s.buffer_pool_idle)
        pool.clear()  # blocks an earlier test left idle in this process-wide pool
        hits, misses = pool.hits, pool.misses
        msg = None
        try:
            for i in range(n):
                msg = await comm.read()
                _check_offloaded(msg, i, size)
            got.set_result((pool.hits - hits, pool.misses - misses))
        except BaseException as exc:
            got.set_exception(exc)
        finally:
            del msg
            await comm.close()

    with dask.config.set(settings):
        async with serve(variant, certs, handler) as listener:
            comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
            try:
                for i in range(n):
                    await comm.write(_offloaded_msg(i, size))
                hits, misses = await asyncio.wait_for(got, WAIT)
            finally:
                await comm.close()
    assert (hits, misses) == (n - 2, 2)

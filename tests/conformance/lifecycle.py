"""Conformance checks of a connection's life as distributed's consumers drive it.

``distributed.core.Server`` reads requests until ``comm.closed()`` or an error,
answers ``close`` with ``"OK"`` and then aborts; a client pipelines requests and
closes. These checks drive those consumers themselves, against every variant.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest
from distributed.comm.core import Comm, CommClosedError
from distributed.core import Server
from distributed.protocol import to_serialize
from distributed.protocol.serialize import Serialize

from tests.certs import Certs
from tests.variants import Variant, connect_to, serve, until_peer_closed

#: Upper bound for any single wait in these checks (a hang fails, never blocks CI).
WAIT = 30


@contextlib.asynccontextmanager
async def running_server(
    variant: Variant, certs: Certs, handlers: dict[str, Any]
) -> AsyncIterator[Server]:
    """A ``distributed.core.Server`` listening on ``variant``."""
    server = Server(handlers)
    await server.listen(f"{variant.scheme}://127.0.0.1:0", **variant.listen_args(certs))
    try:
        yield server
    finally:
        await server.close()


async def _until(done: Callable[[], bool]) -> None:
    """Poll until ``done()``; TimeoutError after ``WAIT`` seconds (a loop
    deadline, as asyncio.timeout, which CPython 3.10 does not have)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not done():
        if loop.time() >= deadline:
            raise TimeoutError(f"not done within {WAIT} s")
        await asyncio.sleep(0.01)


async def _until_handled(server: Server) -> None:
    """Wait (bounded) until the server has stopped handling every comm."""
    await _until(lambda: not server._comms)


async def check_server_handles_requests_pipelined_before_close(
    variant: Variant, certs: Certs
) -> None:
    """Requests that arrived before the peer's FIN are all handled:
    ``closed()`` stays False while complete messages remain unread."""
    seen: list[int] = []
    client_closed = asyncio.Event()

    async def record(comm: Comm, i: int) -> None:
        if i == 0:
            # The rest and the FIN arrive meanwhile.
            await asyncio.wait_for(client_closed.wait(), WAIT)
            await until_peer_closed(comm)
        seen.append(i)

    async with running_server(variant, certs, {"record": record}) as server:
        comm = await connect_to(variant, certs, server.address)
        for i in range(5):
            await comm.write({"op": "record", "i": i, "reply": False})
        await comm.close()
        client_closed.set()
        await _until(lambda: not (len(seen) < 5 and (server._comms or not seen)))
        await _until_handled(server)
    assert seen == [0, 1, 2, 3, 4]


async def check_unread_messages_keep_comm_open_after_peer_close(
    variant: Variant, certs: Certs
) -> None:
    """At the comm level: after the peer wrote and closed, ``closed()``
    is False until the last message is read, then the next read raises."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def handler(comm: Comm) -> None:
        for i in range(3):
            await comm.write({"i": i})
        await comm.close()
        done.set_result(None)

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        await asyncio.wait_for(done, WAIT)
        await until_peer_closed(comm)
        for i in range(3):
            assert not comm.closed(), f"closed() with message {i} unread"
            assert (await asyncio.wait_for(comm.read(), WAIT))["i"] == i
        with pytest.raises(CommClosedError):
            await asyncio.wait_for(comm.read(), WAIT)
        assert comm.closed()


async def check_reply_written_before_abort_arrives(variant: Variant, certs: Certs) -> None:
    """``Server`` answers ``close`` with "OK" and aborts at once; a
    client that pipelined ``ping`` and ``close`` gets both replies."""
    async with running_server(variant, certs, {"ping": lambda: "pong"}) as server:
        comm = await connect_to(variant, certs, server.address)
        await comm.write({"op": "ping"})
        await comm.write({"op": "close", "reply": True})
        got = [await asyncio.wait_for(comm.read(), WAIT) for _ in range(2)]
        assert got == ["pong", "OK"]
        with pytest.raises(CommClosedError):
            await asyncio.wait_for(comm.read(), WAIT)
        await comm.close()


async def check_writes_then_abort_deliver_what_was_written(
    variant: Variant, certs: Certs
) -> None:
    """At the comm level: every ``write()`` that returned before
    ``abort()`` reaches the peer when the kernel can take it at once (a few
    messages of up to 64 KiB, written in one go and in separate iterations)."""
    got: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()

    async def handler(comm: Comm) -> None:
        msgs = []
        with contextlib.suppress(CommClosedError):
            while True:
                msgs.append(await comm.read())
        got.set_result(msgs)

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        for i in range(4):
            await comm.write({"i": i, "pad": b"x" * (i * 20_000)})
        await asyncio.sleep(0)  # the next writes in another loop iteration
        await comm.write({"i": 4})
        await comm.write({"i": 5})
        comm.abort()
        msgs = await asyncio.wait_for(got, WAIT)
    assert [m["i"] for m in msgs] == [0, 1, 2, 3, 4, 5]


async def check_second_concurrent_read_raises_and_aborts(
    variant: Variant, certs: Certs
) -> None:
    """A second ``read()`` while one is pending raises at once (the
    stock comm raises tornado's ``AssertionError("Already reading")``) and aborts
    the comm, which wakes the first read with ``CommClosedError``."""

    async def handler(comm: Comm) -> None:
        with contextlib.suppress(CommClosedError):
            await comm.read()

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        first = asyncio.ensure_future(comm.read())
        await asyncio.sleep(0)  # the first read is pending
        assert not first.done()
        with pytest.raises(AssertionError):
            await asyncio.wait_for(comm.read(), WAIT)
        assert comm.closed()
        with pytest.raises(CommClosedError):
            await asyncio.wait_for(first, WAIT)


async def check_pending_read_wakes_on_connection_loss(variant: Variant, certs: Certs) -> None:
    """A pending read is woken when the peer resets the connection."""
    server_side: asyncio.Future[Comm] = asyncio.get_running_loop().create_future()

    async def handler(comm: Comm) -> None:
        server_side.set_result(comm)
        with contextlib.suppress(CommClosedError):
            await comm.read()

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        pending = asyncio.ensure_future(comm.read())
        peer = await asyncio.wait_for(server_side, WAIT)
        await asyncio.sleep(0)  # the read is pending
        assert not pending.done()
        peer.abort()
        with pytest.raises(CommClosedError):
            await asyncio.wait_for(pending, WAIT)
        assert comm.closed()


def _payloads() -> list[Any]:
    """Messages a writer may send before it reads: about 12 MiB in 12 frames, a
    single 8 MiB array, and 2000 small arrays."""
    mib = 1 << 20
    return [
        {"parts": [to_serialize(np.full(mib, i, dtype="u1")) for i in range(12)]},
        {"one": to_serialize(np.full(8 * mib, 7, dtype="u1"))},
        {"tiny": [to_serialize(np.full(100, i % 256, dtype="u1")) for i in range(2000)]},
    ]


def _checksum(msg: Any) -> list[int]:
    arrays = next(iter(msg.values()))
    if not isinstance(arrays, (list, tuple)):  # lists are read back as tuples
        arrays = [arrays]
    arrays = [a.data if isinstance(a, Serialize) else a for a in arrays]
    return [int(np.asarray(a, dtype="u8").sum()) for a in arrays]


async def check_write_then_read_in_one_task(variant: Variant, certs: Certs) -> None:
    """``await a.write(msg)`` then ``await b.read()`` in the same task
    completes: the receiving side keeps receiving up to ``read-pause`` bytes
    whether or not its application is reading."""
    server_side: asyncio.Future[Comm] = asyncio.get_running_loop().create_future()
    checked = asyncio.Event()  # the check is done with the server's comm

    async def handler(comm: Comm) -> None:
        server_side.set_result(comm)
        await asyncio.wait_for(checked.wait(), WAIT * 2)  # the check drives this comm

    async with serve(variant, certs, handler) as listener:
        a = await connect_to(variant, certs, listener.contact_address)
        b = await asyncio.wait_for(server_side, WAIT)
        try:
            for msg in _payloads():
                for writer, reader in ((a, b), (b, a)):
                    await asyncio.wait_for(writer.write(msg), WAIT)
                    got = await asyncio.wait_for(reader.read(), WAIT)
                    assert _checksum(got) == _checksum(msg)
        finally:
            await a.close()
            b.abort()
            checked.set()


async def check_peers_writing_to_each_other_do_not_deadlock(
    variant: Variant, certs: Certs
) -> None:
    """Two peers that both write large messages before either reads
    both complete (below ``read-pause``)."""
    server_side: asyncio.Future[Comm] = asyncio.get_running_loop().create_future()
    checked = asyncio.Event()  # the check is done with the server's comm

    async def handler(comm: Comm) -> None:
        server_side.set_result(comm)
        await asyncio.wait_for(checked.wait(), WAIT * 2)  # the check drives this comm

    async with serve(variant, certs, handler) as listener:
        a = await connect_to(variant, certs, listener.contact_address)
        b = await asyncio.wait_for(server_side, WAIT)
        try:
            msgs = _payloads()[:2]

            async def write_all(comm: Comm) -> None:
                for msg in msgs:
                    await comm.write(msg)

            await asyncio.wait_for(asyncio.gather(write_all(a), write_all(b)), WAIT)
            for reader in (a, b):
                for msg in msgs:
                    got = await asyncio.wait_for(reader.read(), WAIT)
                    assert _checksum(got) == _checksum(msg)
        finally:
            await a.close()
            b.abort()
            checked.set()

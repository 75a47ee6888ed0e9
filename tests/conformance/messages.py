"""Conformance checks of messages, ends and basic comm semantics."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import numpy as np
import pytest
from distributed.comm.core import CommClosedError
from distributed.protocol import Serialized, deserialize, serialize, to_serialize

from tests.certs import Certs
from tests.variants import Variant, connect_to, raw_socket, serve, until_peer_closed

#: Upper bound for any single wait in these checks (a hang fails, never blocks CI).
WAIT = 30


def _messages() -> list[Any]:
    arr = np.random.default_rng(0).random(200_000)
    return [
        {"op": "ping"},
        {"op": "x", "nested": {"a": [1, 2.5, "s", None, b"bytes"]}},
        {"pickled": to_serialize(complex(1, 2)), "fn": to_serialize(len)},
        {"array": to_serialize(arr), "slice": to_serialize(arr[::7])},
        {"ser": Serialized(*serialize(b"precomputed"))},
        {"empty": to_serialize(b""), "empty_arr": to_serialize(np.empty(0))},
        {"tiny": [to_serialize(np.full(3, i)) for i in range(2000)]},
        {"big": to_serialize(np.ones(3_000_000, dtype="u1"))},
        [1, 2, 3],
        "a string",
    ]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Serialized):
        a = deserialize(a.header, a.frames)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and bool((a == b).all())
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a).__name__ == "Serialize":
        return _same(a.data, b)
    return a == b


async def check_message_shapes_roundtrip(variant: Variant, certs: Certs) -> None:
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        try:
            for msg in _messages():
                await comm.write(msg)
                got = await asyncio.wait_for(comm.read(), WAIT)
                assert _same(msg, got), msg if not isinstance(msg, dict) else list(msg)
        finally:
            await comm.close()


async def check_received_arrays_are_writable(variant: Variant, certs: Certs) -> None:
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        await comm.write({"a": to_serialize(np.arange(100_000))})
        got = await asyncio.wait_for(comm.read(), WAIT)
        got["a"][0] = 42  # a read-only buffer would raise here
        await comm.close()


async def check_addresses(variant: Variant, certs: Certs) -> None:
    seen: asyncio.Future[tuple[str, str]] = asyncio.get_running_loop().create_future()

    async def handler(comm: Any) -> None:
        seen.set_result((comm.local_address, comm.peer_address))
        await comm.close()

    async with serve(variant, certs, handler) as listener:
        prefix = variant.scheme + "://"
        assert listener.listen_address.startswith(prefix)
        comm = await connect_to(variant, certs, listener.contact_address)
        server_local, server_peer = await asyncio.wait_for(seen, WAIT)
        assert comm.peer_address == listener.contact_address
        assert comm.local_address == server_peer
        assert server_local == listener.listen_address
        assert comm.same_host
        await comm.close()


async def check_read_what_arrived_before_peer_closed(variant: Variant, certs: Certs) -> None:
    async def handler(comm: Any) -> None:
        # 50 kB in all: the kernel takes it whether or not the reader reads (a
        # stock comm reads only when asked), so the close completes before.
        for i in range(5):
            await comm.write({"i": i, "pad": b"x" * (i * 5_000)})
        await comm.close()

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        await until_peer_closed(comm)  # the server wrote everything and closed
        got = [(await asyncio.wait_for(comm.read(), WAIT))["i"] for _ in range(5)]
        assert got == [0, 1, 2, 3, 4]
        with pytest.raises(CommClosedError):
            await asyncio.wait_for(comm.read(), WAIT)
        assert comm.closed()


async def check_write_after_close_raises(variant: Variant, certs: Certs) -> None:
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        await comm.close()
        assert comm.closed()
        with pytest.raises(CommClosedError):
            await comm.write({"op": "late"})
        with pytest.raises(CommClosedError):
            await comm.read()


async def check_abort_is_seen_by_peer(variant: Variant, certs: Certs) -> None:
    result: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    async def handler(comm: Any) -> None:
        try:
            await comm.read()
        except BaseException as e:
            result.set_result(e)
        else:
            result.set_result(None)

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        comm.abort()
        assert comm.closed()
        assert isinstance(await asyncio.wait_for(result, WAIT), CommClosedError)


async def check_cancelled_read_aborts_comm(variant: Variant, certs: Certs) -> None:
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        task = asyncio.ensure_future(comm.read())
        await asyncio.sleep(0)  # the read is pending
        assert not task.done()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert comm.closed()


async def check_write_then_close_delivers_everything(variant: Variant, certs: Certs) -> None:
    size = 64 * 1024 * 1024
    payload = np.random.default_rng(1).integers(0, 255, size, dtype="u1")
    got: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    client_closed = asyncio.Event()

    async def handler(comm: Any) -> None:
        # The client writes and closes before we read.
        await asyncio.wait_for(client_closed.wait(), WAIT)
        msgs = []
        try:
            while True:
                msgs.append(await comm.read())
        except CommClosedError:
            got.set_result(msgs)

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        raw_socket(comm).setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
        await comm.write({"data": to_serialize(payload), "n": 1})
        await comm.write({"n": 2})
        closing = asyncio.ensure_future(comm.close())
        await asyncio.sleep(0)  # close() has begun (stock's waits for the reader)
        client_closed.set()
        await asyncio.wait_for(closing, WAIT)
        msgs = await asyncio.wait_for(got, WAIT)
    assert [m["n"] for m in msgs] == [1, 2]
    assert (msgs[0]["data"] == payload).all()


async def check_many_concurrent_comms(variant: Variant, certs: Certs) -> None:
    async with serve(variant, certs) as listener:

        async def client(i: int) -> list[int]:
            comm = await connect_to(variant, certs, listener.contact_address)
            out = []
            for j in range(20):
                await comm.write({"i": i, "j": j, "pad": b"p" * (i * 100)})
                msg = await comm.read()
                out.append(msg["j"])
                assert msg["i"] == i
            await comm.close()
            return out

        results = await asyncio.wait_for(asyncio.gather(*(client(i) for i in range(40))), WAIT * 2)
    assert results == [list(range(20))] * 40


async def check_tls_extra_info(variant: Variant, certs: Certs) -> None:
    if not variant.tls:
        pytest.skip("TLS only")
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        info = comm.extra_info
        assert info["peercert"]["subject"]
        cipher, proto, bits = info["cipher"]
        assert proto.startswith("TLS") and bits >= 128
        await comm.close()


"""Conformance checks of ``write()``: what is accepted is delivered, in the
order the writes were called, whatever happens to the writers afterwards.

The stock comm queues a message (below distributed's offload threshold)
without suspending, so for it a write either has not begun or is complete.
A comm that waits for flow control must keep what that promises to distributed's
code: a write that returned is delivered, a cancelled or timed-out writer fails
no other writer and cuts no message, ``close()`` delivers every write called
before it, and concurrent writers' messages arrive in the order ``write()`` was
called.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import numpy as np
from distributed.comm.core import CommClosedError
from distributed.protocol import dask_deserialize, dask_serialize, to_serialize

from tests.certs import Certs
from tests.variants import Variant, connect_to, serve

#: Upper bound for any single wait in these checks (a hang fails, never blocks CI).
WAIT = 30
#: A message that stays pending behind flow control on a comm that has any
#: (far above write-high-water) and is still below the offload threshold.
LARGE = 8 * 1024 * 1024


def _large(tag: int) -> dict[str, Any]:
    return {"tag": tag, "x": to_serialize(np.full(LARGE, tag % 251, dtype="u1"))}


def _tag(msg: Any) -> Any:
    return msg["tag"] if isinstance(msg, dict) else msg


async def _reader(comm: Any, out: list[Any], done: asyncio.Future[None]) -> None:
    """Read until the end, keeping each message's tag (checking large ones) and
    the bytes of its value ``v``, if any."""
    try:
        while True:
            msg = await comm.read()
            if isinstance(msg, dict) and "x" in msg:
                assert msg["x"].nbytes == LARGE and (msg["x"] == msg["tag"] % 251).all()
            out.append(_tag(msg))
            if isinstance(msg, dict) and "v" in msg:
                out.append(bytes(msg["v"]))
    except CommClosedError:
        pass
    finally:
        if not done.done():
            done.set_result(None)


@contextlib.asynccontextmanager
async def _pair(variant: Variant, certs: Certs):
    """A connected comm whose peer reads everything into ``received``;
    ``ended`` resolves when the peer's read reports the end."""
    loop = asyncio.get_running_loop()
    received: list[Any] = []
    ended: asyncio.Future[None] = loop.create_future()

    async def handler(comm: Any) -> None:
        await _reader(comm, received, ended)

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        try:
            yield comm, received, ended
        finally:
            comm.abort()


async def _until(predicate: Any) -> None:
    for _ in range(int(WAIT / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def check_a_large_write_on_an_idle_comm_completes_within_any_timeout(
    variant: Variant, certs: Certs
) -> None:
    """Nothing is queued: the write is accepted at once, so a timeout around it
    has nothing to cut, and the peer reads it and the next one."""
    async with _pair(variant, certs) as (comm, received, _):
        await asyncio.wait_for(comm.write(_large(1)), 1e-4)
        assert not comm.closed()
        await asyncio.wait_for(comm.write({"tag": 2}), WAIT)
        await _until(lambda: 2 in received)
        assert received == [1, 2], received


async def check_cancelling_a_waiting_writer_fails_no_other(variant: Variant, certs: Certs) -> None:
    async with _pair(variant, certs) as (comm, received, _):
        first = asyncio.ensure_future(comm.write(_large(1)))
        second = asyncio.ensure_future(comm.write({"tag": 2}))
        third = asyncio.ensure_future(comm.write({"tag": 3}))
        fourth = asyncio.ensure_future(comm.write(_large(4)))
        await asyncio.sleep(0)  # every writer has begun
        second.cancel()
        fourth.cancel()
        results = await asyncio.wait_for(
            asyncio.gather(first, second, third, fourth, return_exceptions=True), WAIT)
        assert not isinstance(results[0], BaseException), results
        assert not isinstance(results[2], BaseException), results
        for r in (results[1], results[3]):
            assert r is None or isinstance(r, int) or isinstance(r, asyncio.CancelledError), r
        assert not comm.closed()
        await asyncio.wait_for(comm.write({"tag": 5}), WAIT)
        await _until(lambda: 5 in received)
        expected = [1] + [t for t, r in ((2, results[1]), (3, None), (4, results[3]))
                          if not isinstance(r, asyncio.CancelledError)] + [5]
        assert received == expected, (received, results)


async def check_writes_arrive_in_the_order_they_were_called(variant: Variant, certs: Certs) -> None:
    """One task writes A (large) then C; another writes B, begun while A may
    still be pending. The peer receives them in the order write() was called."""
    async with _pair(variant, certs) as (comm, received, _):
        called: list[int] = []

        async def write(tag: int, msg: Any) -> None:
            called.append(tag)
            await comm.write(msg)

        async def a_then_c() -> None:
            await write(1, _large(1))
            await write(3, {"tag": 3})

        first = asyncio.ensure_future(a_then_c())
        await asyncio.sleep(0)  # write(A) called
        second = asyncio.ensure_future(write(2, {"tag": 2}))
        await asyncio.wait_for(asyncio.gather(first, second), WAIT)
        await _until(lambda: len(received) == 3)
        assert received == called, (received, called)


async def check_close_delivers_writes_waiting_behind_a_large_one(
    variant: Variant, certs: Certs
) -> None:
    async with _pair(variant, certs) as (comm, received, ended):
        first = asyncio.ensure_future(comm.write(_large(1)))
        second = asyncio.ensure_future(comm.write({"tag": 2}))
        await asyncio.sleep(0)  # both writers have begun
        await asyncio.wait_for(comm.close(), WAIT)
        results = await asyncio.wait_for(
            asyncio.gather(first, second, return_exceptions=True), WAIT)
        assert not any(isinstance(r, BaseException) for r in results), results
        await asyncio.wait_for(ended, WAIT)
        assert received == [1, 2], received


class Strided:
    """A value whose custom serializer gives a buffer that is not C-contiguous
    (a strided or Fortran-ordered view), as a user's serializer may."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data


@dask_serialize.register(Strided)
def _serialize_strided(x: Strided) -> tuple[dict[str, Any], list[Any]]:
    return {"shape": x.data.shape}, [memoryview(x.data)]


@dask_deserialize.register(Strided)
def _deserialize_strided(header: dict[str, Any], frames: list[Any]) -> bytes:
    return bytes(memoryview(frames[0]).cast("B"))


def strided_buffers() -> dict[str, np.ndarray]:
    """Views of ``size`` bytes that are not C-contiguous, by size and layout."""
    out = {}
    for label, n in (("1KiB", 1024), ("64KiB", 64 * 1024), ("1MiB", 1 << 20)):
        base = np.arange(2 * n, dtype="u1")
        out[f"strided-{label}"] = base[::2]
        out[f"2d-column-{label}"] = base.reshape(-1, 64)[:, ::2]
        out[f"fortran-{label}"] = np.asfortranarray(base[:n].reshape(-1, 32))
    return out


async def check_non_contiguous_buffers_are_delivered_or_refused_keeping_the_comm(
    variant: Variant, certs: Certs
) -> None:
    """Every such buffer is either delivered (a Fortran-ordered one in its memory
    order, any other in C order), or its
    write raises TypeError before anything is sent; the comm survives either
    way, and from 128 KiB up every one is delivered (the stock comm copies it)."""
    async with _pair(variant, certs) as (comm, received, _):
        outcome = {}
        for i, (name, data) in enumerate(strided_buffers().items()):
            try:
                await asyncio.wait_for(comm.write({"tag": i, "v": to_serialize(Strided(data))}),
                                       WAIT)
                outcome[name] = "sent"
            except TypeError:
                outcome[name] = "TypeError"
            assert not comm.closed(), name
            if data.nbytes >= 128 * 1024:
                assert outcome[name] == "sent", (name, outcome)
        await asyncio.wait_for(comm.write({"tag": "end"}), WAIT)
        await _until(lambda: "end" in received)
        buffers = strided_buffers()
        expected: list[Any] = []
        for i, name in enumerate(buffers):
            if outcome[name] == "sent":
                expected += [i, buffers[name].tobytes(order="A")]
        assert received == [*expected, "end"], outcome

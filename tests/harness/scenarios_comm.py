"""Comm-level scenarios under ``gen_test`` (its leak checks: threads, processes,
instances, file descriptors), on whichever comm serves ``tcp://`` and ``tls://``."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from distributed.comm import connect, listen
from distributed.comm.utils import OFFLOAD_THRESHOLD
from distributed.protocol import Serialized, deserialize, to_serialize
from distributed.utils_test import gen_test

from tests.harness.conftest import security

LARGE = OFFLOAD_THRESHOLD + (1 << 20)


def _security(scheme: str) -> tuple[dict, dict]:
    if scheme != "tls":
        return {}, {}
    sec = security()
    return sec.get_listen_args("scheduler"), sec.get_connection_args("client")


@pytest.mark.parametrize("scheme", ["tcp", "tls"])
@pytest.mark.parametrize("deserialize_", [True, False])
@gen_test()
async def test_large_array_both_ways(scheme: str, deserialize_: bool) -> None:
    """An array above the offload threshold, read with and without
    deserialization (large buffers go through the receive-buffer pool)."""
    largs, cargs = _security(scheme)
    arr = np.arange(LARGE, dtype="u1")

    async def echo(comm) -> None:
        await comm.write(await comm.read())
        await comm.close()

    async with listen(f"{scheme}://127.0.0.1:0", echo, deserialize=deserialize_,
                      **largs) as listener:
        comm = await connect(listener.contact_address, deserialize=deserialize_, **cargs)
        await comm.write({"x": to_serialize(arr)})
        got = (await comm.read())["x"]
        if not deserialize_:
            assert isinstance(got, Serialized)
            got = deserialize(got.header, got.frames)
        assert (got == arr).all()
        await comm.close()


@gen_test()
async def test_many_large_messages_then_quiet() -> None:
    """Large frames reuse pooled buffers; nothing the transport started may be
    alive once the comms are closed (gen_test checks threads)."""
    async def sink(comm) -> None:
        for _ in range(6):
            await comm.read()
        await comm.write("done")
        await comm.close()

    async with listen("tcp://127.0.0.1:0", sink) as listener:
        comm = await connect(listener.contact_address)
        for i in range(6):
            await comm.write({"i": i, "x": to_serialize(np.full(4 << 20, i, dtype="u1"))})
        assert await comm.read() == "done"
        await comm.close()


@gen_test()
async def test_a_cancelled_writer_loses_nothing_else() -> None:
    """A large write, a writer cancelled behind it, a writer after it: the comm
    stays open and the peer gets every message that was not cancelled."""
    got: asyncio.Queue = asyncio.Queue()

    async def sink(comm) -> None:
        while True:
            try:
                await got.put(await comm.read())
            except Exception:
                return

    async with listen("tcp://127.0.0.1:0", sink) as listener:
        comm = await connect(listener.contact_address)
        big = {"i": 1, "x": to_serialize(np.ones(8 << 20, "u1"))}
        first = asyncio.ensure_future(comm.write(big))
        second = asyncio.ensure_future(comm.write({"i": 2}))
        third = asyncio.ensure_future(comm.write({"i": 3}))
        await asyncio.sleep(0)
        second.cancel()
        await asyncio.gather(first, third)
        cancelled = second.cancelled()
        await comm.write({"i": 4})
        ids = [(await asyncio.wait_for(got.get(), 30))["i"] for _ in range(3 if cancelled else 4)]
        assert ids == ([1, 3, 4] if cancelled else [1, 2, 3, 4])
        assert not comm.closed()
        await comm.close()


"""Comm semantics beyond the conformance checks: the finalizer, messages of
thousands of frames, and a single frame over 2 GiB."""

from __future__ import annotations

import asyncio
import gc
import logging
import mmap
from typing import Any

import dask
import numpy as np
import pytest
from distributed.comm.core import CommClosedError
from distributed.comm.utils import to_frames
from distributed.protocol import dask_deserialize, dask_serialize, to_serialize

from tests.certs import Certs
from tests.helpers_net import WAIT
from tests.variants import OURS, OWN, connect_to, serve, variant_fixture

ASYNCIO = next(v for v in OURS if v.name == "asyncio")
variant = variant_fixture(OWN)


async def test_dropped_comm_is_closed_by_finalizer(variant, certs, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="distributed.comm.asyncio")
    seen: asyncio.Future = asyncio.get_running_loop().create_future()

    async def handler(comm) -> None:
        try:
            await comm.read()
        except BaseException as e:
            seen.set_result(e)
        else:
            seen.set_result(None)

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        description = repr(comm)
        del comm
        for _ in range(3):
            gc.collect()
        assert "Closing dangling comm" in caplog.text
        assert description in caplog.text
        assert isinstance(await asyncio.wait_for(seen, WAIT), CommClosedError)


async def test_closed_comm_is_not_reported_dangling(variant, certs, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="distributed.comm.asyncio")
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        await comm.close()
        del comm
        gc.collect()
    assert "dangling" not in caplog.text


async def test_thousands_of_tiny_frames_in_one_message(variant, certs) -> None:
    n = 5000
    msg = {
        "tiny": [to_serialize(np.full(i % 4, i, dtype="u2")) for i in range(n)],
        "empty": to_serialize(b""),
    }
    frames = await to_frames(msg)
    assert len(frames) > n  # really that many frames on the wire
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        try:
            for _ in range(2):  # twice: the comm is fine afterwards
                await comm.write(msg)
                got = await asyncio.wait_for(comm.read(), WAIT)
                assert len(got["tiny"]) == n
                for i, arr in enumerate(got["tiny"]):
                    assert arr.dtype == np.uint16 and arr.shape == (i % 4,)
                    assert (arr == i).all()
        finally:
            await comm.close()


async def test_more_frames_than_max_frames_closes_the_comm(variant, certs) -> None:
    """max-frames is enforced on real comms: the receiver aborts, the sender's
    next read raises, and the listener serves the next client."""
    errors: asyncio.Queue = asyncio.Queue()

    async def handler(comm) -> None:
        try:
            await echo_until_error(comm)
        except BaseException as e:
            errors.put_nowait(e)

    with dask.config.set({"distributed.comm.asyncio.max-frames": 100}):
        async with serve(variant, certs, handler) as listener:
            comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
            await comm.write({"tiny": [to_serialize(np.zeros(1)) for _ in range(200)]})
            with pytest.raises(CommClosedError):
                await asyncio.wait_for(comm.read(), WAIT)
            err = await asyncio.wait_for(errors.get(), WAIT)
            assert "exceed the bound of 100" in str(err), str(err)
            comm2 = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
            await comm2.write({"ok": [to_serialize(np.zeros(1)) for _ in range(10)]})
            assert len((await asyncio.wait_for(comm2.read(), WAIT))["ok"]) == 10
            await comm2.close()


class ManyFrames:
    """A value whose serializer gives ``n`` one-byte frames."""

    def __init__(self, n: int) -> None:
        self.n = n


@dask_serialize.register(ManyFrames)
def _serialize_many(x: ManyFrames) -> tuple[dict[str, Any], list[bytes]]:
    return {"n": x.n}, [b"%d" % (i % 10) for i in range(x.n)]


@dask_deserialize.register(ManyFrames)
def _deserialize_many(header: dict[str, Any], frames: list[Any]) -> tuple[int, bool]:
    return len(frames), all(bytes(f) == b"%d" % (i % 10) for i, f in enumerate(frames))


async def test_a_message_of_more_than_a_million_frames_is_delivered(certs: Certs) -> None:
    """distributed sends such messages (a get_data reply of half a million small
    arrays has two frames each), and the stock comm delivers them: no
    frame-count bound may refuse them by default. Plain asyncio:// only, as the
    frame count is the decoder's, whatever the transport (its unit tests cover
    the rest)."""
    n = (1 << 20) + 1000

    async def handler(comm: Any) -> None:
        await comm.write(await comm.read())  # the deserialized (count, intact)

    async with serve(ASYNCIO, certs, handler) as listener:
        comm = await connect_to(ASYNCIO, certs, listener.contact_address)
        try:
            await comm.write({"v": to_serialize(ManyFrames(n))})
            got = await asyncio.wait_for(comm.read(), WAIT)
            assert list(got["v"]) == [n, True], got
        finally:
            await comm.close()


async def echo_until_error(comm) -> None:
    while True:
        await comm.write(await comm.read())


@pytest.mark.slow
async def test_single_frame_over_2_gib() -> None:
    """One 2.1 GiB frame (distributed.comm.shard raised so nothing splits it):
    every receive and send is cut at C int max internally; the bytes arrive intact."""
    n = int(2.1 * 2**30)
    # Mostly zeros, in an anonymous mapping of 4 KiB pages (numpy asks for huge
    # pages, so one marker would fault in 2 MiB): pages only read map the
    # kernel's zero page and cost no memory. On a fresh VM each first-touched
    # page is a host fault, about 12 s per GiB; a filled payload cost 25-60 s
    # of CI time. A unique 2-byte index every 64 KiB catches any byte lost,
    # doubled or moved.
    mapping = mmap.mmap(-1, n)
    payload = np.frombuffer(mapping, dtype="u1")
    at = np.arange(0, n - 1, 1 << 16)
    payload[at] = (at >> 16) & 0xFF
    payload[at + 1] = (at >> 24) & 0xFF
    payload[[0, 2**31 - 1, 2**31, 2**31 + 1, n - 1]] = [1, 2, 3, 4, 5]
    got: asyncio.Future = asyncio.get_running_loop().create_future()

    async def handler(comm) -> None:
        got.set_result(await comm.read())
        await comm.write({"ack": True})
        await comm.close()

    with dask.config.set({"distributed.comm.shard": "4GiB"}):
        async with serve(ASYNCIO, None, handler) as listener:
            comm = await connect_to(ASYNCIO, None, listener.contact_address, timeout=WAIT)
            try:
                assert comm.max_shard_size > n
                msg = {"big": to_serialize(payload)}
                frames = await to_frames(msg, frame_split_size=comm.max_shard_size)
                assert max(memoryview(f).nbytes for f in frames) == n  # one frame
                del frames
                await asyncio.wait_for(comm.write(msg), 4 * WAIT)
                result = await asyncio.wait_for(got, 4 * WAIT)
                assert (await asyncio.wait_for(comm.read(), 4 * WAIT)) == {"ack": True}
            finally:
                await comm.close()
    big = result["big"]
    assert big.dtype == np.uint8 and big.shape == (n,)
    step = 256 << 20
    for i in range(0, n, step):
        assert np.array_equal(big[i : i + step], payload[i : i + step]), i

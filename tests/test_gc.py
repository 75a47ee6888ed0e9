"""The comm path creates no reference cycles.

With the collector off, 100k messages sent and received over a real comm must
leave no more garbage for ``gc.collect()`` than the same loop of awaits over an
``asyncio.Queue`` without any comm. Cyclic garbage is what makes the scheduler's
generation-2 collections long (the 1.5 s pauses of the original profile).
"""

from __future__ import annotations

import asyncio
import gc

from distributed.comm import connect, listen

N = 100_000
MSG = {"op": "task-finished", "key": "x", "nbytes": 8, "startstops": ({"start": 1.0},)}


async def _echo(comm) -> None:
    try:
        while True:
            await comm.write(await comm.read())
    except OSError:
        pass


async def _garbage_after(loop_body) -> int:
    gc.collect()
    gc.disable()
    try:
        await loop_body()
        return gc.collect()
    finally:
        gc.enable()


async def test_no_cycles_per_message() -> None:
    async with listen("asyncio://127.0.0.1:0", _echo) as listener:
        comm = await connect(listener.contact_address)
        await comm.write(MSG)
        await comm.read()  # warm up: first-use caches are not per-message garbage

        async def over_comm() -> None:
            for _ in range(N // 2):
                await comm.write(MSG)
                await comm.read()

        comm_garbage = await _garbage_after(over_comm)
        await comm.close()

    queue: asyncio.Queue = asyncio.Queue()

    async def over_queue() -> None:
        for _ in range(N // 2):
            await queue.put(dict(MSG))
            await queue.get()

    baseline = await _garbage_after(over_queue)
    # Every message crossed the comm twice (request and echo): N messages.
    assert comm_garbage <= baseline, (comm_garbage, baseline)


async def test_unread_small_messages_hold_nothing_the_gc_tracks() -> None:
    """5,000 small messages that arrived while the reader was busy (on uvloop,
    libuv receives up to 32 times before the reader runs) wait in the comm
    without objects the collector tracks, so a burst triggers no collection
    and nothing is promoted to an older generation. Read afterwards, they are
    all there, in order."""
    n = 5000
    held: asyncio.Queue = asyncio.Queue()
    release = asyncio.Event()
    got: list = []

    async def busy_reader(comm) -> None:
        await held.put(comm)
        await release.wait()
        for _ in range(n):
            got.append(await comm.read())
        await comm.close()

    async with listen("asyncio://127.0.0.1:0", busy_reader) as listener:
        comm = await connect(listener.contact_address)
        server_comm = await asyncio.wait_for(held.get(), 10)
        decoder = server_comm._protocol._decoder
        gc.collect()
        gc.disable()
        try:
            before = len(gc.get_objects())
            for i in range(n):
                await comm.write({"op": "task-finished", "i": i})
            for _ in range(1000):  # at most 10 s
                if len(decoder.messages) == n:
                    break
                await asyncio.sleep(0.01)
            queued = len(decoder.messages)
            grown = len(gc.get_objects()) - before
        finally:
            gc.enable()
        release.set()
        for _ in range(1000):
            if len(got) == n:
                break
            await asyncio.sleep(0.01)
        await comm.close()
    assert queued == n
    assert grown < n // 10, grown  # 15,000 before: list, memoryview, its buffer
    assert got == [{"op": "task-finished", "i": i} for i in range(n)]


async def test_no_cycles_when_a_message_is_offloaded_after_its_arrays(monkeypatch) -> None:
    """A message over distributed's offload threshold whose copy-free array is
    serialized on the loop and whose other data then goes to the offload
    thread (packing's Offload, re-raised through the second-pass check) leaves
    no cyclic garbage: an exception's traceback must not hold the frames that
    hold it."""
    import distributed.comm.utils
    import numpy as np
    from distributed.protocol import to_serialize

    monkeypatch.setattr(distributed.comm.utils, "OFFLOAD_THRESHOLD", 1000)
    other = np.zeros(2000, dtype=[("a", "u1")])  # distributed pickles its dtype: offloaded
    msg = {"op": "s", "p": to_serialize(np.arange(2000, dtype="u1")), "q": to_serialize(other)}

    async def echo_size(comm) -> None:
        try:
            while True:
                got = await comm.read()
                await comm.write(got["p"].nbytes + got["q"].nbytes)
        except OSError:
            pass

    async with listen("asyncio://127.0.0.1:0", echo_size) as listener:
        comm = await connect(listener.contact_address)
        await comm.write(msg)
        assert await comm.read() == 4000  # warm up

        async def over_comm() -> None:
            for _ in range(200):
                await comm.write(msg)
                assert await comm.read() == 4000

        garbage = await _garbage_after(over_comm)
        await comm.close()
    assert garbage == 0

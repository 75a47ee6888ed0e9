"""The pool of large receive buffers (asynciocomm.pool): a block is handed out
again only once nothing refers to it, within its bounds, and end to end a
message the application still holds is never overwritten."""

from __future__ import annotations

import asyncio
import ctypes
import pickle
import threading

import dask
import numpy as np
import pytest

from asynciocomm import pool as poolmod
from asynciocomm.pool import GRANULE, BufferPool, refcount_works, size_class
from tests.helpers_net import WAIT
from tests.variants import OWN, connect_to, serve, variant_fixture

MiB = 1024 * 1024


def address(view: memoryview) -> int:
    """Where a buffer's memory starts (the probe's own export is dropped)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


def test_the_reference_count_calibrates_on_this_interpreter() -> None:
    assert refcount_works()
    assert poolmod.IDLE_REFS > 0


@pytest.mark.parametrize("n", [1, GRANULE - 1, GRANULE, GRANULE + 1, 130 * MiB + 239])
def test_size_classes_are_whole_granules(n: int) -> None:
    size = size_class(n)
    assert size % GRANULE == 0
    assert n <= size < n + GRANULE


HOLDERS = {
    "memoryview slice": lambda mv: mv[10:20],
    "numpy array": lambda mv: np.frombuffer(mv, dtype="u1")[5:],
    "numpy view of a view": lambda mv: np.asarray(mv).view("u2")[1:],
    "PickleBuffer": lambda mv: pickle.PickleBuffer(mv),
    "ctypes array": lambda mv: (ctypes.c_char * 4).from_buffer(mv),
}


@pytest.mark.parametrize("holder", list(HOLDERS.values()), ids=list(HOLDERS))
def test_a_block_is_reused_only_once_every_view_is_gone(holder) -> None:
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=60)
    first = pool.allocate(3 * MiB)
    first[:] = b"\x07" * len(first)
    where = address(first)
    kept = holder(first)
    del first
    second = pool.allocate(3 * MiB)  # same size class, but the first is still held
    assert address(second) != where
    second[:] = b"\x01" * len(second)
    assert bytes(memoryview(kept).cast("B")[:4]) == b"\x07" * 4
    del kept, second
    third = pool.allocate(3 * MiB)  # both blocks idle now: the first one serves
    assert address(third) == where
    assert (pool.hits, pool.misses) == (1, 2)


def test_reuse_hands_out_the_same_memory_and_counts_it() -> None:
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=60)
    view = pool.allocate(5 * MiB)
    where = address(view)
    del view
    again = pool.allocate(5 * MiB - 100)  # same class
    assert address(again) == where and len(again) == 5 * MiB - 100
    assert (pool.hits, pool.misses) == (1, 1)
    assert pool.held_bytes == size_class(5 * MiB)


def test_small_requests_bypass_the_pool() -> None:
    pool = BufferPool(capacity=64 * MiB, min_size=4 * MiB, idle=60)
    view = pool.allocate(4 * MiB - 1)
    assert len(view) == 4 * MiB - 1
    assert pool.held_bytes == 0 and (pool.hits, pool.misses) == (0, 0)


def test_a_much_larger_idle_block_does_not_serve_a_small_request() -> None:
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=60)
    big = pool.allocate(32 * MiB)
    where = address(big)
    del big
    small = pool.allocate(4 * MiB)
    assert address(small) != where
    assert pool.held_bytes == 36 * MiB


def test_a_reused_block_is_at_most_a_sixteenth_larger_than_the_request() -> None:
    """What a message pins beyond its own bytes stays small: dask's memory
    accounting counts the array, not the block under it."""
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=60)
    block = pool.allocate(17 * MiB)
    where = address(block)
    del block
    smaller = pool.allocate(31 * MiB // 2)  # 17 > 15.5 + 15.5/16: a new block
    assert address(smaller) != where
    del smaller
    fits = pool.allocate(16 * MiB)  # 17 <= 16 + 16/16: the 17 MiB block
    assert address(fits) == where


def test_capacity_bounds_what_is_held_and_idle_blocks_make_room() -> None:
    pool = BufferPool(capacity=10 * MiB, min_size=MiB, idle=60)
    a = pool.allocate(4 * MiB)
    b = pool.allocate(4 * MiB)
    c = pool.allocate(4 * MiB)  # does not fit: an ordinary buffer, still usable
    c[:] = b"x" * len(c)
    assert pool.held_bytes == 8 * MiB
    del a
    d = pool.allocate(6 * MiB)  # frees the idle 4 MiB block to make room
    assert pool.held_bytes == 10 * MiB
    assert len(b) == 4 * MiB and len(d) == 6 * MiB
    assert pool.held_bytes <= pool.capacity


def test_clear_frees_idle_blocks_only() -> None:
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=60)
    held = pool.allocate(2 * MiB)
    dropped = pool.allocate(4 * MiB)
    del dropped
    assert pool.idle_bytes() == 4 * MiB
    assert pool.clear() == 4 * MiB
    assert pool.held_bytes == 2 * MiB and len(held) == 2 * MiB


def test_capacity_zero_turns_the_pool_off() -> None:
    pool = BufferPool(capacity=0, min_size=MiB, idle=60)
    pool.allocate(8 * MiB)
    assert pool.held_bytes == 0


async def test_idle_blocks_are_freed_by_the_sweep_and_held_ones_are_not(monkeypatch) -> None:
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=0.02)
    swept = asyncio.Queue()  # one item per sweep that ran
    real_sweep = pool._sweep

    def counted_sweep() -> None:
        real_sweep()
        swept.put_nowait(None)

    monkeypatch.setattr(pool, "_sweep", counted_sweep)
    held = pool.allocate(2 * MiB)
    dropped = pool.allocate(4 * MiB)
    del dropped
    for _ in range(500):  # bounded: 500 x 10 ms
        if pool.held_bytes == 2 * MiB:
            break
        await asyncio.sleep(0.01)
    assert pool.held_bytes == 2 * MiB
    while not swept.empty():
        swept.get_nowait()
    for _ in range(3):  # three more sweeps, each past the idle time: the held block stays
        await asyncio.wait_for(swept.get(), 5)
    assert pool.held_bytes == 2 * MiB and len(held) == 2 * MiB
    del held
    for _ in range(500):
        if pool.held_bytes == 0:
            break
        await asyncio.sleep(0.01)
    assert pool.held_bytes == 0


def test_the_last_connection_ending_frees_idle_blocks_and_leaves_held_ones() -> None:
    """The pool holds memory only while a connection uses it: when the last one
    ends, idle blocks are freed at once and blocks still in use are left to
    their owners, intact, with no timer or thread left to free them later."""
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=3600)
    pool.attach()
    pool.attach()
    held = pool.allocate(2 * MiB)
    held[:4] = b"kept"
    pool.allocate(4 * MiB)  # dropped at once: idle
    pool.detach()
    assert pool.held_bytes == size_class(2 * MiB) + size_class(4 * MiB)  # one still connected
    pool.detach()
    assert pool.held_bytes == 0 and pool.idle_bytes() == 0
    assert bytes(held[:4]) == b"kept"
    assert pool._sweep_handle is None


async def test_a_sweep_frees_idle_blocks_on_the_loop_that_allocated() -> None:
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=0.02)
    pool.attach()
    try:
        pool.allocate(2 * MiB)  # dropped at once
        assert pool._sweep_handle is not None
        for _ in range(500):  # bounded: 500 x 10 ms
            if pool.held_bytes == 0:
                break
            await asyncio.sleep(0.01)
        assert pool.held_bytes == 0 and pool._sweep_handle is None  # nothing left to sweep
        held = pool.allocate(2 * MiB)  # a new block: the sweep is scheduled again
        assert pool._sweep_handle is not None
        del held
    finally:
        pool.detach()


def test_a_block_of_a_closed_loop_is_swept_on_the_next_loop_that_allocates() -> None:
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=0.02)
    pool.attach()

    async def allocate(n: int) -> None:
        pool.allocate(n)  # dropped at once

    first = asyncio.new_event_loop()
    try:
        first.run_until_complete(allocate(16 * MiB))
    finally:
        first.close()
    assert pool.held_bytes == size_class(16 * MiB)

    async def allocate_and_wait() -> bool:
        held = pool.allocate(2 * MiB)
        for _ in range(500):
            if pool.held_bytes == size_class(2 * MiB):
                return len(held) == 2 * MiB
            await asyncio.sleep(0.01)
        return False

    second = asyncio.new_event_loop()
    try:
        assert second.run_until_complete(allocate_and_wait())
    finally:
        second.close()
        pool.detach()


@pytest.mark.parametrize("with_loop", [True, False], ids=["in a loop", "without a loop"])
def test_the_pool_starts_no_thread(with_loop: bool) -> None:
    before = set(threading.enumerate())
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=0.01)
    pool.attach()

    async def allocate() -> None:
        for _ in range(4):
            pool.allocate(2 * MiB)
            await asyncio.sleep(0.02)

    if with_loop:
        asyncio.run(allocate())
    else:
        for _ in range(4):
            pool.allocate(2 * MiB)
    pool.detach()
    assert set(threading.enumerate()) <= before


def test_threads_never_share_a_block() -> None:
    """Four threads allocate, fill with their own byte, yield and check: a block
    handed to two owners at once shows up as a foreign byte."""
    pool = BufferPool(capacity=64 * MiB, min_size=MiB, idle=60)
    bad: list[str] = []

    def work(tag: int) -> None:
        mine = bytes([tag]) * 64
        for _ in range(300):
            view = pool.allocate(2 * MiB)
            view[:64] = mine
            view[-64:] = mine
            threading.Event().wait(0.0001)
            if bytes(view[:64]) != mine or bytes(view[-64:]) != mine:
                bad.append(f"thread {tag} lost its block")
                return
            del view

    threads = [threading.Thread(target=work, args=(t,)) for t in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not bad
    assert pool.hits > 0


variant = variant_fixture(OWN)


async def test_held_messages_stay_intact_while_later_ones_reuse_blocks(
    variant, certs
) -> None:
    """Six messages with a 2 MiB array each, echoed over a real connection; the
    client keeps every other echo. The kept arrays still hold their own bytes at
    the end, and the dropped ones' blocks were reused."""
    from distributed.protocol.serialize import to_serialize

    n = 2 * MiB
    settings = {
        "distributed.comm.asyncio.buffer-pool-min-size": "1MiB",
        "distributed.comm.asyncio.buffer-pool-idle": "1h",
    }
    with dask.config.set(settings):
        async with serve(variant, certs) as listener:
            comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
            try:
                kept = []
                # One at a time: each echo is read before the next write.
                for i in range(6):
                    arr = np.full(n, i, dtype="u1")
                    await comm.write({"i": i, "x": to_serialize(arr)})
                    msg = await asyncio.wait_for(comm.read(), WAIT)
                    assert msg["i"] == i
                    if i % 2 == 0:
                        kept.append((i, msg["x"]))
                    del msg
                for i, arr in kept:
                    assert arr.shape == (n,) and (arr == i).all(), i
            finally:
                await comm.close()
    pools = [p for k, p in poolmod._pools.items() if k[1] == MiB and k[2] == 3600]
    assert pools and sum(p.hits for p in pools) >= 1


def test_the_shared_pool_is_one_per_setting_across_threads() -> None:
    got: list[BufferPool] = []
    key = (123 * MiB, 3 * MiB, 7.0)
    threads = [threading.Thread(target=lambda: got.append(poolmod.shared_pool(*key)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(got) == 8 and all(p is got[0] for p in got)
    assert poolmod.shared_pool(*key) is got[0]
    assert poolmod.shared_pool(124 * MiB, 3 * MiB, 7.0) is not got[0]


async def test_a_handler_that_drops_each_message_on_the_next_read_cycles_two_blocks(
    variant, certs, tls_reads_past_pause
) -> None:
    """A sender streams 2 MiB arrays; the handler keeps each message until its
    next ``read()`` returns, as ``msg = await comm.read()`` in a loop does. The
    receiver yields to the reader after each large message, so the frame after
    it reuses the block the reader just dropped: two blocks cycle, not three
    (see asynciocomm.reading)."""
    from distributed.protocol.serialize import to_serialize

    n, count = 2 * MiB, 24
    blocks: list[int] = []
    done = asyncio.Event()

    async def handler(comm) -> None:
        try:
            while True:
                msg = await comm.read()
                if msg == "bye":
                    break
                blocks.append(msg["x"].__array_interface__["data"][0])
        finally:
            done.set()

    settings = {
        "distributed.comm.asyncio.buffer-pool-min-size": "1MiB",
        "distributed.comm.asyncio.buffer-pool-idle": "1h",
    }
    with dask.config.set(settings):
        async with serve(variant, certs, handler) as listener:
            comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
            try:
                arr = np.ones(n, dtype="u1")
                for _ in range(count):
                    await comm.write({"x": to_serialize(arr)})
                await comm.write("bye")
                await asyncio.wait_for(done.wait(), WAIT)
            finally:
                await comm.close()
    assert len(blocks) == count
    assert len(set(blocks[4:])) == 2, blocks

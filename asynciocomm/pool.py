"""Reuse of large receive buffers once the application has dropped them.

Every large frame is received into a buffer of its own, which the message keeps
(numpy arrays are built on it without a copy). A fresh buffer of that size is a
fresh ``mmap``: the kernel zeroes every page on first touch, and on a VM whose
balloon driver reports free pages to the host (``virtio_balloon`` free page
reporting, as on Firecracker) a page freed a moment ago may no longer be backed,
so touching it again costs a host fault as well. Measured here on 128 MiB
frames: 20-50 ms of receiver CPU per message, bimodal from run to run, against
13.5 ms steady with reuse, and 7 ms against 215 ms to first-touch 128 MiB of
pages that were or were not reported meanwhile.

:class:`BufferPool` keeps the buffers it handed out and hands one out again once
nothing else refers to it. There is no hook for "the last view was released" in
Python 3.11, so ownership is read from the reference count: the pool holds
exactly one reference to each block and every export (memoryview, numpy array,
PickleBuffer) holds one more. The count is calibrated once (:func:`refcount_works`)
and pooling is off wherever it cannot be trusted (free-threaded builds).

Bounds: the pool tracks at most ``capacity`` bytes (in use and idle); a frame
that does not fit gets an ordinary buffer. An idle block is freed once it has not
been handed out for ``idle`` seconds, by a timer on the event loop that
allocated it, and by every allocation that misses. The pool holds memory only
while a connection uses it: the connections :meth:`BufferPool.attach` and
:meth:`BufferPool.detach` themselves, and when the last one ends, the idle
blocks are freed and the ones still in use are left to their owners, freed
like any buffer when the application drops them. No thread is started: nothing
the pool does outlives the connections that need it (distributed's test
harness fails a test that leaves a thread behind).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import weakref
from typing import Any

from asynciocomm.wire.buffers import Allocator, default_allocator

#: Block sizes are rounded up to this, so frames of nearly the same size (a 128
#: MiB array plus a header of a few hundred bytes) share a size.
GRANULE = 64 * 1024
#: An idle block serves a request if it is at most a sixteenth larger. What a
#: message holds beyond its own bytes is what dask's memory accounting cannot see
#: (it counts the array, not the block), so this bounds it at 6.25 % plus one
#: granule; a 128 MiB block never ends up under a 4 MiB frame.
SLACK = 16


def size_class(n: int) -> int:
    """The size of a new block for a request of ``n`` bytes."""
    return -(-n // GRANULE) * GRANULE


def _refs(block: Any) -> int:
    return sys.getrefcount(block)


class _Block:
    """One pooled buffer: the exporting object (a numpy array), its size and when
    it was last handed out. Only this slot refers to ``obj`` while it is idle."""

    __slots__ = ("obj", "size", "last_used")

    def __init__(self, obj: Any, size: int, last_used: float) -> None:
        self.obj = obj
        self.size = size
        self.last_used = last_used

    def idle(self) -> bool:
        """Nothing but this block refers to its buffer (see refcount_works)."""
        return _refs(self.obj) == IDLE_REFS


def refcount_works() -> bool:
    """Whether an unexported block's reference count is stable and every export
    adds to it, as on GIL builds of CPython. Calibrates :data:`IDLE_REFS` with
    the very expression :meth:`_Block.idle` evaluates."""
    global IDLE_REFS
    if getattr(sys, "_is_gil_enabled", lambda: True)() is False:
        return False
    holder = _Block(bytearray(8), 8, 0.0)
    idle = _refs(holder.obj)
    view = memoryview(holder.obj)
    exported = _refs(holder.obj)
    sliced = view[2:]
    del view
    still = _refs(holder.obj)
    del sliced
    if not (exported == idle + 1 and still == idle + 1 and _refs(holder.obj) == idle):
        return False
    IDLE_REFS = idle
    return True


#: The reference count of a block's buffer that only the block refers to, as seen
#: by ``_refs(block.obj)``; set by :func:`refcount_works`.
IDLE_REFS = -1
_REFCOUNT_OK = refcount_works()


class BufferPool:
    """Large receive buffers, handed out again once nothing refers to them.

    ``allocate(n)`` returns a writable ``memoryview`` of exactly ``n`` bytes,
    like distributed's ``host_array``. Requests below ``min_size``, or beyond
    ``capacity``, get a plain buffer from ``allocator``.
    """

    def __init__(
        self,
        capacity: int,
        min_size: int,
        idle: float,
        allocator: Allocator | None = None,
    ) -> None:
        self.capacity = capacity if _REFCOUNT_OK else 0
        self.min_size = min_size
        self.idle = idle
        self._allocator = allocator or default_allocator()
        self._blocks: list[_Block] = []
        self._held = 0
        # Loops in several threads may allocate at once (a sync Client's loop, and
        # workers in threads): a block must never be handed out twice.
        self._lock = threading.Lock()
        self._users = 0
        self._sweep_handle: asyncio.TimerHandle | None = None
        self._sweep_loop: asyncio.AbstractEventLoop | None = None
        self.hits = 0
        self.misses = 0

    def attach(self) -> None:
        """A connection that receives into this pool's blocks has started."""
        with self._lock:
            self._users += 1

    def detach(self) -> None:
        """A connection has ended. After the last one, the pool holds nothing:
        idle blocks are freed, and blocks still in use stay with their owners."""
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            self._release(time.monotonic(), -1.0)
            self._blocks = []
            self._held = 0
            handle, self._sweep_handle = self._sweep_handle, None
            if handle is not None and _running_loop() is self._sweep_loop:
                handle.cancel()  # a timer of another thread's loop just finds nothing

    @property
    def held_bytes(self) -> int:
        """Bytes of every block the pool tracks, in use or idle."""
        return self._held

    def idle_bytes(self) -> int:
        """Bytes of the blocks that nothing but the pool refers to."""
        with self._lock:
            return sum(block.size for block in self._blocks if block.idle())

    def allocate(self, n: int) -> memoryview:
        if n < self.min_size or self.capacity <= 0:
            return self._allocator(n)
        with self._lock:
            return self._allocate(n)

    def _allocate(self, n: int) -> memoryview:
        want = size_class(n)
        now = time.monotonic()
        best: _Block | None = None
        for block in self._blocks:
            if (want <= block.size <= want + want // SLACK
                    and (best is None or block.size < best.size)
                    and block.idle()):
                best = block
        if best is not None:
            best.last_used = now
            self.hits += 1
            return memoryview(best.obj)[:n]
        self.misses += 1
        self._release(now, self.idle)
        if self._held + want > self.capacity:
            self._release(now, -1.0)  # make room: free every idle block
        if self._held + want > self.capacity:
            return self._allocator(n)
        view = self._allocator(want)
        self._blocks.append(_Block(view.obj, want, now))
        self._held += want
        self._schedule_sweep()
        return view[:n]

    def clear(self) -> int:
        """Free every idle block now; returns the bytes freed."""
        with self._lock:
            return self._release(time.monotonic(), -1.0)

    def _release(self, now: float, idle_for: float) -> int:
        """Free the idle blocks last handed out more than ``idle_for`` s ago."""
        kept: list[_Block] = []
        freed = 0
        for block in self._blocks:
            if now - block.last_used > idle_for and block.idle():
                freed += block.size
            else:
                kept.append(block)
        self._blocks = kept
        self._held -= freed
        return freed

    def _schedule_sweep(self) -> None:
        """Free idle blocks after ``idle`` seconds, on the running loop, unless a
        sweep is due on a loop that is still open (called with the lock held).
        Without a running loop, the next miss or the last connection's end
        frees them."""
        loop = self._sweep_loop
        if self._sweep_handle is not None and loop is not None and not loop.is_closed():
            return
        loop = _running_loop()
        if loop is None:
            return
        self._sweep_loop = loop
        self._sweep_handle = loop.call_later(self.idle, _sweep, weakref.ref(self))

    def _sweep(self) -> None:
        """Free the blocks idle for ``idle`` seconds; sweep again later while
        the pool holds any."""
        with self._lock:
            self._sweep_handle = None
            self._release(time.monotonic(), self.idle)
            if self._blocks:
                self._schedule_sweep()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _sweep(ref: weakref.ref[BufferPool]) -> None:
    """The timer's callback: a weak reference, so a dropped pool is not kept."""
    pool = ref()
    if pool is not None:
        pool._sweep()


_pools: dict[tuple[int, int, float], BufferPool] = {}
_pools_lock = threading.Lock()


def shared_pool(capacity: int, min_size: int, idle: float) -> BufferPool:
    """The process-wide pool for these settings (comms share their blocks, and
    listeners or connectors created in different threads get the same pool)."""
    key = (capacity, min_size, idle)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = BufferPool(capacity, min_size, idle)
        return pool

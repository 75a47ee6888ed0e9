"""Where the decoder's buffers come from, and when a large one may be allocated.

A received frame of at least ``direct-read`` bytes gets a buffer of its own, which
outlives the message (a numpy array is built on it without a copy), so it comes
from the same allocator as the stock comm's: distributed's ``host_array``. The
decoder's shared receive buffer comes from it too, uninitialized: its pages cost
memory only once data lands in them.
"""

from __future__ import annotations

from collections.abc import Callable

Allocator = Callable[[int], memoryview]

#: Buffers from this size up are held back while earlier messages are unread,
#: or while the reader has not asked for the next message (``demand``; see
#: FrameDecoder.resume). It is glibc's default mmap threshold: smaller buffers
#: come from the heap and reuse warm pages; larger ones, allocated ahead of the
#: reader, make the heap grow and shrink so that every page of the next one
#: faults again (measured: 1 MiB frames, 224 faults and ~0.5 ms of system time
#: per message with read-ahead, none without; 16 MiB frames allocated while the
#: reader still held the previous message, 90-250 faults and 1.3-1.5x the CPU
#: per message against the stock comm's 12, which allocates only in read()).
DEFER_ALLOCATION = 128 * 1024


def _bytearray_allocate(n: int) -> memoryview:
    return memoryview(bytearray(n))


def default_allocator() -> Allocator:
    """distributed's ``host_array`` (numpy.empty when numpy is importable)."""
    try:
        from distributed.protocol.utils import host_array
    except ImportError:  # pragma: no cover - distributed is a hard dependency
        return _bytearray_allocate
    return host_array


def scratch_allocate(n: int) -> memoryview:
    """An uninitialized buffer of ``n`` bytes for the shared receive buffer:
    thousands of mostly idle comms stay cheap, where a zero-filled bytearray
    would commit the whole buffer up front."""
    return default_allocator()(n)

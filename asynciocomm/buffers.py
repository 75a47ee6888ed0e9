"""Where the decoder's buffers come from.

A received frame of at least ``direct-read`` bytes gets a buffer of its own, which
outlives the message (a numpy array is built on it without a copy), so it comes
from the same allocator as the stock comm's: distributed's ``host_array``. The
decoder's shared receive buffer comes from it too, uninitialized: its pages cost
memory only once data lands in them.
"""

from __future__ import annotations

from collections.abc import Callable

Allocator = Callable[[int], memoryview]


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

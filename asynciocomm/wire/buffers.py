"""Where the decoder's buffers come from.

A received frame of at least ``direct-read`` bytes gets a buffer of its own, which
outlives the message (a numpy array is built on it without a copy), so it is
allocated as the stock comm's are (distributed's ``host_array``): ``numpy.empty``
when numpy is importable, else a ``bytearray``. The decoder's shared receive
buffer comes from it too, uninitialized: its pages cost memory only once data
lands in them.
"""

from __future__ import annotations

from collections.abc import Callable

Allocator = Callable[[int], memoryview]


def _bytearray_allocate(n: int) -> memoryview:
    return memoryview(bytearray(n))


def _numpy_allocate(n: int) -> memoryview:
    import numpy

    return numpy.empty((n,), dtype="u1").data


def default_allocator() -> Allocator:
    """``numpy.empty`` when numpy is importable (uninitialized memory), else
    ``bytearray``: the choice of distributed's ``host_array``."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return _bytearray_allocate
    return _numpy_allocate


def scratch_allocate(n: int) -> memoryview:
    """An uninitialized buffer of ``n`` bytes for the shared receive buffer:
    thousands of mostly idle comms stay cheap, where a zero-filled bytearray
    would commit the whole buffer up front."""
    return default_allocator()(n)

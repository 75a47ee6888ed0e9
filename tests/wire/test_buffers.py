"""Where the decoder's buffers come from (asynciocomm.wire.buffers)."""

from __future__ import annotations

import numpy as np
from distributed.protocol.utils import host_array

from asynciocomm.wire import buffers
from asynciocomm.wire.speedups import FrameDecoder


def test_default_allocator_makes_what_distributeds_host_array_makes() -> None:
    """The codec imports nothing of distributed: its allocator makes the same
    buffers as distributed's ``host_array`` (uninitialized numpy memory)."""
    ours, theirs = buffers.default_allocator()(1000), host_array(1000)
    assert type(ours.obj) is type(theirs.obj) is np.ndarray
    assert (ours.nbytes, ours.format, ours.readonly) == (theirs.nbytes, theirs.format,
                                                         theirs.readonly)


def test_scratch_buffer_is_writable_and_exactly_sized() -> None:
    view = buffers.scratch_allocate(12345)
    assert view.nbytes == 12345 and not view.readonly
    view[-1] = 7
    assert view[-1] == 7


def test_large_frames_land_in_numpy_buffers_of_their_own() -> None:
    """A frame above direct-read gets a buffer from the allocator (numpy, as in
    the stock comm), not a view into the shared receive buffer."""
    import struct

    frame = bytes(range(256)) * 1024  # 256 KiB
    wire = struct.pack("<QQQ", 16, 1, len(frame)) + frame
    dec = FrameDecoder(allocate=buffers.default_allocator())
    dec.feed(wire)
    (got,), nbytes = dec.pop()
    assert nbytes == len(frame) and bytes(got) == frame
    assert isinstance(got.obj, np.ndarray) and got.obj.nbytes == len(frame)

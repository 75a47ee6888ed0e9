"""The frame encoder: messages to distributed's tcp wire format (no I/O).

The wire format (see :mod:`asynciocomm.wire.decoder`, the read side) is little-endian
u64s: ``prefix | nframes | lengths... | frames...``.

:func:`encode_frames` is the write side: it computes the same prefix as the stock
writer (so the bytes on the wire are identical), joins the header with the small
frames and passes large frames by reference as 1-D byte views.

This module is also compiled by Cython (pure-Python mode) into
``asynciocomm.wire._cencoder``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pickle import PickleBuffer
from typing import Union

try:
    import cython
except ImportError:  # run as plain Python without Cython: see purecython
    from asynciocomm.wire import purecython as cython  # type: ignore[no-redef]

from asynciocomm.wire.limits import C_INT_MAX

Buffer = Union[bytes, bytearray, memoryview]

_SINGLE = struct.Struct("<QQQ")
_U64 = 8


#: distributed's tcp writer joins a message into one ``bytes`` object below this
#: total (header included), or below _JOIN_FRAGMENTED_MAX when its frames average
#: under _JOIN_MEAN_MAX (``distributed.comm.tcp._add_frames_header``). A buffer
#: that is not C-contiguous cannot be joined: the stock comm raises TypeError
#: there and copies it anywhere else. Messages with such a buffer follow that
#: rule, so that both comms accept and refuse the same messages.
_JOIN_MAX = 2**17
_JOIN_FRAGMENTED_MAX = 2**25
_JOIN_MEAN_MAX = 2**15


def _stock_joins(total: int, nbuffers: int) -> bool:
    return total < _JOIN_MAX or (
        total < _JOIN_FRAGMENTED_MAX and total // nbuffers < _JOIN_MEAN_MAX)


def _contiguous(frame: memoryview) -> memoryview:
    """A frame that is not C-contiguous, as distributed's ``ensure_memoryview``
    makes it: a Fortran-ordered one as its memory, any other copied in C order."""
    if frame.contiguous:
        return PickleBuffer(frame).raw()
    return memoryview(bytearray(frame))


def _as_bytes_view(frame: Buffer) -> memoryview:
    mv = frame if isinstance(frame, memoryview) else memoryview(frame)
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")  # gh-135862: partial sends of N-d views truncate data
    return mv


def shared_prefix_nbytes(frames: Sequence[Buffer], lengths: Sequence[int]) -> int:
    """Bytes of the leading frames a reader may keep in one shared buffer.

    This is the stock writer's rule, so both comms put the same bytes on the wire:
    bytes frames (msgpack header, pickles, compressed data) are shared; the first
    non-bytes buffer is shared too if what precedes it is negligible, and the
    shared region ends before the next distinct non-bytes buffer.
    """
    nosplit = 0
    first: object = None
    for frame, nb in zip(frames, lengths):
        obj = frame.obj if isinstance(frame, memoryview) else frame
        if not isinstance(obj, bytes):
            if first is None:
                if nosplit > max(2048, nb * 0.05):
                    break
                first = obj
            elif first is not obj:
                break
        nosplit += nb
    return nosplit


#: Header layouts by frame count, for the counts below _STRUCTS_MAX: building
#: the format and finding it in struct's cache cost as much as packing.
_STRUCTS: dict[int, struct.Struct] = {}
_STRUCTS_MAX = 64


def _header_struct(n: int) -> struct.Struct:
    layout = _STRUCTS.get(n)
    if layout is None:
        layout = struct.Struct(f"<QQ{n}Q")
        if n < _STRUCTS_MAX:
            _STRUCTS[n] = layout
    return layout


@cython.ccall  # a C call from encode_frames in the compiled twin
def encode_header(
    frames: Sequence[Buffer], lengths: Sequence[int], shared: int = -1
) -> bytes:
    """The prefix, frame count and lengths of a message. ``shared`` is
    :func:`shared_prefix_nbytes` when the caller knows it already."""
    n = len(lengths)
    if shared < 0:
        shared = shared_prefix_nbytes(frames, lengths)
    return _header_struct(n).pack(_U64 + _U64 * n + shared, n, *lengths)


def encode_single(frame: bytes, coalesce: int) -> tuple[list[Buffer], int]:
    """:func:`encode_frames` for a message of one ``bytes`` frame (the common
    msgpack-only message): same bytes, a fraction of the work."""
    n = len(frame)
    header = _SINGLE.pack(16 + n, 1, n)
    if n < coalesce:
        return [header + frame], 24 + n
    return [header, frame], 24 + n


def encode_frames(frames: Sequence[Buffer], coalesce: int) -> tuple[list[Buffer], int]:
    """Serialize one message for the wire.

    Returns the buffers to write, in order, and their total size. The header and
    every frame under ``coalesce`` bytes are joined into single ``bytes`` objects;
    larger frames are returned as 1-D byte views of the caller's memory (never
    mutate a frame after writing it), split below C int max.
    """
    lengths: list[int] = []
    only_bytes = True
    strided = False
    for f in frames:
        if type(f) is bytes:
            lengths.append(len(f))
        else:
            only_bytes = False
            mv = f if type(f) is memoryview else memoryview(f)
            lengths.append(mv.nbytes)
            if not mv.c_contiguous:
                strided = True
    payload = sum(lengths)
    # Frames that are all bytes are all shared (shared_prefix_nbytes' rule).
    header = encode_header(frames, lengths, payload if only_bytes else -1)
    total = len(header) + payload
    if strided:
        if _stock_joins(total, len(frames) + 1):
            raise TypeError(
                f"a buffer of this {total}-byte message is not C-contiguous; "
                "distributed's tcp writer joins a message of this size and cannot join it")
        frames = [f if type(f) is bytes or memoryview(f).c_contiguous
                  else _contiguous(memoryview(f)) for f in frames]
    if total < coalesce or max(lengths) < coalesce:
        return [b"".join([header, *frames])], total
    out: list[Buffer] = []
    batch: list[Buffer] = [header]
    for frame, nb in zip(frames, lengths):
        if nb < coalesce:
            batch.append(frame)
            continue
        if batch:
            out.append(b"".join(batch) if len(batch) > 1 else batch[0])
            batch = []
        mv = _as_bytes_view(frame)
        for i in range(0, nb, C_INT_MAX):
            out.append(mv[i : i + C_INT_MAX] if nb > C_INT_MAX else mv)
    if batch:
        out.append(b"".join(batch) if len(batch) > 1 else batch[0])
    return out, total

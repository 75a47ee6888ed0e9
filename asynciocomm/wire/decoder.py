"""The frame decoder: distributed's tcp wire format as a pure state machine (no I/O).

Wire format (identical to ``distributed.comm.tcp``, all little-endian u64)::

    prefix | nframes | length[0] ... length[nframes-1] | frame[0] ... frame[n-1]

``prefix`` counts the prelude (``nframes`` and the lengths) plus the leading frames
that a reader may keep in one shared buffer; the frames after that region are
"uncompressed buffers" (numpy, parquet, ...) that outlive the message and so get a
buffer each. The decoder checks that ``prefix`` really ends on a frame boundary.

Strategy of :class:`FrameDecoder` (the read side, driven like a BufferedProtocol):

* Bytes arrive through :meth:`FrameDecoder.get_buffer` /
  :meth:`FrameDecoder.buffer_updated`. Most of the time ``get_buffer`` hands out the
  free tail of one reusable receive buffer, so one ``recv()`` can carry the prefix,
  the frame count, the lengths and any number of small frames of any number of
  messages.
* Once a message's lengths are known, its frames are planned as *blocks*, with
  the stock reader's memory layout: the shared region is one block, and every
  later frame is a block of its own. A small block is copied once out of the
  receive buffer into a writable ``bytearray``; its frames are views into it. A
  block of at least ``direct_read`` bytes gets its own buffer (``allocate``: a
  numpy host array when numpy is there), and ``get_buffer`` then returns that
  buffer's unfilled part, so the kernel writes the frame where it will stay: no
  copy after the kernel's. The shards of one large buffer sit in the shared
  region together, so distributed re-merges them without a copy.
* Every bound (frame count, message size, prefix consistency) is checked before
  anything is allocated for the message. A violation raises :class:`ProtocolError`
  and the decoder refuses further input.

The write side is :mod:`asynciocomm.wire.encoder`.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections import deque

try:
    import cython
except ImportError:  # run as plain Python without Cython: see purecython
    from asynciocomm.wire import purecython as cython  # type: ignore[no-redef]
from collections.abc import Sequence

from asynciocomm.wire.buffers import Allocator, default_allocator, scratch_allocate
from asynciocomm.wire.errors import ProtocolError
from asynciocomm.wire.limits import C_INT_MAX

_PRELUDE = struct.Struct("<QQ")
_ONE_LENGTH = struct.Struct("<Q")  # the lengths of a one-frame message
#: The whole header of a one-frame message: prefix, nframes (1), its length.
_HEAD_ONE = struct.Struct("<QQQ")
_U64 = 8
#: Their sizes, as C integers in the compiled twin.
_PRELUDE_BYTES = cython.declare(cython.Py_ssize_t, _PRELUDE.size)
_HEAD_ONE_BYTES = cython.declare(cython.Py_ssize_t, _HEAD_ONE.size)

# Decoder states.
_S_PRELUDE = 0  # waiting for prefix + nframes (16 bytes)
_S_LENGTHS = 1  # waiting for 8 * nframes bytes of lengths
_S_FRAMES = 2  # receiving the planned blocks
_S_FAILED = 3  # a ProtocolError was raised; no more input accepted


@cython.cclass
class FrameDecoder:
    """Incremental decoder of distributed's tcp framing.

    Feed it with ``get_buffer()`` / ``buffer_updated(n)`` (zero-copy, as an
    ``asyncio.BufferedProtocol`` does) or with :meth:`feed` (copies, for tests and
    plain ``data_received`` users). Complete messages queue in :attr:`messages`
    (test it, take them with :meth:`pop`, which returns each as a list of
    writable memoryviews); :attr:`queued_bytes` counts their payload.

    This module is also compiled by Cython (pure-Python mode) into
    ``asynciocomm.wire._cdecoder``; the declarations below type the fields there and are
    plain class attributes here.
    """

    _view = cython.declare(object)
    _cap = cython.declare(cython.Py_ssize_t)
    _start = cython.declare(cython.Py_ssize_t)
    _end = cython.declare(cython.Py_ssize_t)
    _state = cython.declare(cython.int)
    _need = cython.declare(cython.Py_ssize_t)
    _direct_read = cython.declare(cython.Py_ssize_t)
    _max_frames = cython.declare(cython.Py_ssize_t)
    _max_message = cython.declare(cython.Py_ssize_t)
    _allocate = cython.declare(object)
    _prefix = cython.declare(cython.Py_ssize_t)
    _nframes = cython.declare(cython.Py_ssize_t)
    _blocks = cython.declare(list)
    _block = cython.declare(cython.Py_ssize_t)
    _frames = cython.declare(list)
    _msg_nbytes = cython.declare(cython.Py_ssize_t)
    _target = cython.declare(object)
    _tpos = cython.declare(cython.Py_ssize_t)
    _tend = cython.declare(cython.Py_ssize_t)
    _sizes = cython.declare(object)
    _lengths = cython.declare(object)
    messages = cython.declare(object, visibility="readonly")
    queued_bytes = cython.declare(cython.Py_ssize_t, visibility="readonly")

    def __init__(
        self,
        *,
        read_buffer: int = 256 * 1024,
        direct_read: int = 64 * 1024,
        max_frames: int | None = None,
        max_message: int = 1 << 40,
        allocate: Allocator | None = None,
    ) -> None:
        if not 0 < direct_read <= read_buffer // 2:
            raise ValueError("direct_read must be positive and <= read_buffer / 2")
        self._view = scratch_allocate(read_buffer)
        self._cap = read_buffer
        self._start = 0  # first unparsed byte in the scratch buffer (_view)
        self._end = 0  # end of the received bytes in it
        self._state = _S_PRELUDE
        self._need = _PRELUDE_BYTES  # contiguous bytes from _start the current state waits for
        self._direct_read = direct_read
        # As many as a header within max_message can list (8 bytes a frame).
        self._max_frames = max_message // _U64 if max_frames is None else max_frames
        self._max_message = max_message
        self._allocate = allocate or default_allocator()
        self._prefix = 0
        self._nframes = 0
        # Planned blocks of the current message: (frame lengths, size, direct)
        self._blocks: list[tuple[tuple[int, ...], int, bool]] = []
        self._block = 0
        self._frames: list[memoryview] = []
        self._msg_nbytes = 0
        # Direct target: a buffer of its own the kernel writes into
        self._target: memoryview | None = None
        self._tpos = 0
        self._tend = 0
        # The lengths of a header too large for the receive buffer, as they arrive.
        self._lengths: array[int] | None = None
        self.messages: deque[list[memoryview] | bytearray] = deque()
        self._sizes: deque[int] = deque()
        self.queued_bytes = 0

    # -- input -------------------------------------------------------------------

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """A non-empty writable view where the next received bytes must go.

        ``sizehint`` (the transport's, as in ``BufferedProtocol.get_buffer``) is
        ignored: the decoder knows what it waits for."""
        target = self._target
        if target is not None:
            pos = self._tpos
            return target[pos : min(self._tend, pos + C_INT_MAX)]
        if self._state == _S_FAILED:
            raise ProtocolError("decoder failed earlier; no more input accepted")
        start = self._start
        if start and (self._end == self._cap or start + self._need > self._cap):
            # Move the partial element to the front: at most one block (< cap / 2).
            end = self._end
            self._view[: end - start] = bytes(self._view[start:end])
            self._start = 0
            self._end = end - start
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written into the view last returned by get_buffer()."""
        if nbytes <= 0:
            return
        if self._target is not None:
            self._tpos += nbytes
            if self._tpos < self._tend:
                return
            self._target_done()
        else:
            self._end += nbytes
        self._parse()

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` in through get_buffer()/buffer_updated()."""
        src = memoryview(data).cast("B")
        pos, total = 0, src.nbytes
        while pos < total:
            dst = self.get_buffer()
            n = min(dst.nbytes, total - pos)
            dst[:n] = src[pos : pos + n]
            pos += n
            self.buffer_updated(n)

    # -- output ------------------------------------------------------------------

    def pop(self) -> tuple[list[memoryview], int]:
        """Remove and return the oldest complete message and its payload size
        (IndexError if none)."""
        nbytes = self._sizes.popleft()
        self.queued_bytes -= nbytes
        item = self.messages.popleft()
        if type(item) is bytearray:  # a one-frame message, queued bare
            return [memoryview(item)], nbytes
        return item, nbytes

    def peek(self, n: int) -> bytes:
        """Up to ``n`` received bytes not yet consumed (for diagnostics)."""
        return bytes(self._view[self._start : min(self._end, self._start + n)])

    @property
    def at_boundary(self) -> bool:
        """True when no message is partially received (a clean place to stop)."""
        return (
            self._state == _S_PRELUDE
            and self._start == self._end
            and self._target is None
        )

    @property
    def buffered_partial(self) -> int:
        """Bytes of a partially received message held by the decoder."""
        return (self._end - self._start) + (self._tpos if self._target else 0)

    # -- parsing -----------------------------------------------------------------

    @cython.cfunc
    def _fail(self, msg: str) -> ProtocolError:
        self._state = _S_FAILED
        self._target = None
        self._lengths = None
        return ProtocolError(msg)

    @cython.cfunc
    def _parse(self) -> None:
        """Consume what the receive buffer holds, one state at a time. Each
        state's step returns the new position, or its bitwise complement (a
        negative number) when it waits for more bytes (``_need`` set)."""
        pos: cython.Py_ssize_t = self._start
        end: cython.Py_ssize_t = self._end
        try:
            while True:
                state = self._state
                if state == _S_PRELUDE:
                    pos = self._on_prelude(pos, end)
                elif state == _S_LENGTHS:
                    pos = self._on_lengths(pos, end)
                elif state == _S_FRAMES:
                    pos = self._on_frames(pos, end)
                    end = self._end  # a direct block may have consumed the buffer
                else:  # _S_FAILED
                    raise ProtocolError("decoder failed earlier; no more input accepted")
                if pos < 0:
                    pos = ~pos
                    return
        finally:
            if pos == end:
                pos = end = 0
            self._start = pos
            self._end = end

    @cython.cfunc
    def _on_prelude(self, pos: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """A message's prefix and frame count; a small one-frame message
        received whole (most of the traffic) is queued at once."""
        buf = self._view
        avail: cython.Py_ssize_t = end - pos
        if avail >= _HEAD_ONE_BYTES:
            prefix, nframes, length = _HEAD_ONE.unpack_from(buf, pos)
            if (nframes == 1 and prefix == _PRELUDE_BYTES + length
                    and length < self._direct_read and avail >= _HEAD_ONE_BYTES + length
                    and length <= self._max_message):
                pos += _HEAD_ONE_BYTES
                self._msg_nbytes = length
                self._queue(bytearray(buf[pos : pos + length]))
                return pos + length
            # Anything else, or anything the checks refuse, the general way.
        elif avail < _PRELUDE_BYTES:
            self._need = _PRELUDE_BYTES
            return ~pos
        else:
            prefix, nframes = _PRELUDE.unpack_from(buf, pos)
        self._check_prelude(prefix, nframes)
        self._prefix = prefix
        self._nframes = nframes
        self._state = _S_LENGTHS
        need = _U64 * nframes
        if need > self._cap // 2:
            # A header too large for the receive buffer: its lengths are taken
            # as they arrive, so what it holds grows with what the peer really
            # sent, never with what it claims.
            self._lengths = array("Q")
            need = _U64
        self._need = need
        return pos + _PRELUDE_BYTES

    @cython.cfunc
    def _on_lengths(self, pos: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """The frame lengths; then the message's blocks are planned."""
        if self._lengths is not None:
            pos = self._take_lengths(pos, end)
            if self._lengths is not None:
                self._need = _U64
                return ~pos
            return pos
        need: cython.Py_ssize_t = _U64 * self._nframes
        if end - pos < need:
            self._need = need
            return ~pos
        if self._nframes == 1:
            lengths = _ONE_LENGTH.unpack_from(self._view, pos)
        else:
            lengths = struct.unpack_from(f"<{self._nframes}Q", self._view, pos)
        self._plan(lengths)
        return pos + need

    @cython.cfunc
    def _on_frames(self, pos: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """The next planned block: copied out of the receive buffer when small,
        else received into a buffer of its own."""
        size: cython.Py_ssize_t = self._blocks[self._block][1]
        if self._blocks[self._block][2]:
            # Direct block: take what is already here, then let the kernel fill
            # the rest of its own buffer, whether or not earlier messages are
            # read yet (a peer must keep receiving: see FramedProtocol's read
            # flow control).
            self._start = pos
            self._end = end
            self._begin_target(size)
            pos = self._start
            return ~pos if self._target is not None else pos
        if end - pos < size:
            self._need = size
            return ~pos
        self._complete_block(bytearray(self._view[pos : pos + size]))
        return pos + size

    @cython.cfunc
    def _take_lengths(self, start: cython.Py_ssize_t, end: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """Take the whole lengths received of a large header; plan the message
        once all have arrived. Returns the new start."""
        lengths = self._lengths
        assert lengths is not None
        take: cython.Py_ssize_t = min(end - start, _U64 * (self._nframes - len(lengths)))
        take -= take % _U64
        if take:
            part = array("Q", bytes(self._view[start : start + take]))
            if sys.byteorder == "big":
                part.byteswap()  # the wire is little-endian
            lengths.extend(part)
            start += take
        if len(lengths) == self._nframes:
            self._lengths = None
            self._plan(lengths)
        return start

    @cython.cfunc
    def _check_prelude(self, prefix: int, nframes: int) -> None:
        if nframes == 0:
            raise self._fail("malformed header: a message with zero frames")
        if nframes > self._max_frames:
            raise self._fail(
                f"malformed header: {nframes} frames exceed the bound of "
                f"{self._max_frames} (distributed.comm.asyncio.max-frames)"
            )
        header = _U64 + _U64 * nframes
        if prefix < header or prefix - header > self._max_message:
            raise self._fail(
                f"malformed header: prefix {prefix} inconsistent with {nframes} frames"
            )

    @cython.cfunc
    def _plan(self, lengths: Sequence[int]) -> None:
        length: cython.Py_ssize_t
        acc: cython.Py_ssize_t
        k: cython.Py_ssize_t
        shared_bytes: cython.Py_ssize_t
        direct_read: cython.Py_ssize_t
        total = sum(lengths)
        if total > self._max_message:
            raise self._fail(
                f"message of {total} bytes exceeds the bound of {self._max_message} "
                "bytes (distributed.comm.asyncio.max-message)"
            )
        # The shared region ends exactly after some frame k (prefix consistency).
        shared_bytes = self._prefix - _U64 - _U64 * len(lengths)
        k = 0
        acc = 0
        while acc < shared_bytes and k < len(lengths):
            acc += lengths[k]
            k += 1
        if acc != shared_bytes:
            raise self._fail(
                f"malformed header: prefix {self._prefix} does not end on a frame "
                "boundary"
            )
        # Same memory layout as the stock reader: the shared region is one buffer
        # (it holds headers, pickles and the shards of one split buffer, which
        # distributed then merges without copying), and every later frame, an
        # independent buffer that outlives the message, gets one of its own.
        direct_read = self._direct_read
        blocks: list[tuple[tuple[int, ...], int, bool]] = []
        if k:
            blocks.append((tuple(lengths[:k]), shared_bytes, shared_bytes >= direct_read))
        for length in lengths[k:]:
            blocks.append(((length,), length, length >= direct_read))
        self._blocks = blocks
        self._block = 0
        self._frames = []
        self._msg_nbytes = total
        self._state = _S_FRAMES

    @cython.cfunc
    def _begin_target(self, size: int) -> None:
        """Allocate a buffer of its own for the next ``size`` bytes and fill it
        from the receive buffer as far as possible; set ``_target`` if it needs
        more."""
        try:
            target = self._allocate(size)
        except MemoryError:
            raise self._fail(f"cannot allocate {size} bytes for a frame") from None
        start, end = self._start, self._end
        k = min(end - start, size)
        if k:
            target[:k] = self._view[start : start + k]
            self._start = start + k
        self._target = target
        self._tpos = k
        self._tend = size
        if k == size:
            self._target_done()

    @cython.cfunc
    def _target_done(self) -> None:
        target = self._target
        assert target is not None
        self._target = None
        self._complete_block(target)

    @cython.cfunc
    def _complete_block(self, block: bytearray | memoryview) -> None:
        pos: cython.Py_ssize_t
        length: cython.Py_ssize_t
        lengths = self._blocks[self._block][0]
        if len(self._blocks) == 1 and len(lengths) == 1 and type(block) is bytearray:
            # A whole message in one small frame, most of the traffic: it waits
            # in the queue as the bytearray alone (pop() makes its memoryview).
            # A bytearray is not tracked by the garbage collector; a list, a
            # memoryview and the memoryview's buffer object are: a burst of
            # thousands of queued messages (uvloop
            # reads up to 32 times before the reader runs) would otherwise
            # trigger collections that promote them all and, in turn, full
            # collections of the whole heap.
            self._blocks = []
            self._queue(block)
            return
        view = block if isinstance(block, memoryview) else memoryview(block)
        frames = self._frames
        if len(lengths) == 1:
            frames.append(view)
        else:
            pos = 0
            for length in lengths:
                frames.append(view[pos : pos + length])
                pos += length
        self._block += 1
        if self._block == len(self._blocks):
            self._frames = []
            self._blocks = []
            self._queue(frames)

    @cython.cfunc
    def _queue(self, message: object) -> None:
        """Queue a complete message; wait for the next one's prelude."""
        self.messages.append(message)
        self._sizes.append(self._msg_nbytes)
        self.queued_bytes += self._msg_nbytes
        self._state = _S_PRELUDE
        self._need = _PRELUDE_BYTES

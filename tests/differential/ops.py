"""The operations of the differential harness, the messages they write, and the
model that says which operation is deterministic on the stock comm.

A :class:`Sequence` is a pair set-up plus a tuple of steps, each step one
operation on side ``"A"`` (the client comm returned by ``distributed.comm.connect``)
or ``"B"`` (the server comm handed to the listener's handler). Its ``repr`` is
valid Python: a failing example can be pasted into :func:`runner.run_sequence`.

The :class:`Model` replays a sequence as the stock comm would (a pure function of
the operations, never of a run), for two uses:

* the generator offers only operations whose stock outcome does not depend on
  timing (each rule below says why), and
* the runner marks the ``closed()`` entries that stock itself leaves to timing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Union

Side = Literal["A", "B"]
SIDES: tuple[Side, Side] = ("A", "B")
#: Pair set-ups. ``plain``: listen, connect, keep the listener. ``stop``:
#: ``listener.stop()`` while a connect is in flight and the server side is in
#: distributed's handshake. ``ctx``: ``async with listen(...)`` exited at that
#: moment. See runner._until_handshaking.
SETUPS = ("plain", "stop", "ctx")
#: Message kinds (see :func:`make_message`). ``strided``: a buffer that is not
#: C-contiguous, from a custom serializer. ``large-after-X``: a value of kind X,
#: then a buffer above distributed's offload threshold (the message is
#: serialized in a thread); ``large-then-to-pickle``: the other order. The
#: buffer is bytes, not a NumPy array: asynciocomm serializes copy-free arrays
#: on the loop whatever their size (RELIABILITY.md), so an array would not
#: exercise the offload.
KINDS = ("dict", "list", "str", "array", "frames", "serialized", "bytes", "strided",
         "large-after-to-pickle", "large-after-pickled", "large-after-serialized",
         "large-after-set", "large-then-to-pickle")
#: Kinds whose size is a parameter; the others are a few dozen bytes.
SIZED = frozenset({"array", "frames", "serialized", "bytes", "strided"})
#: Kinds above the offload threshold, whose writes suspend on every comm.
OFFLOADED = frozenset(k for k in KINDS if k.startswith("large-"))

#: An abort or reset may lose what it leaves in user-space or kernel buffers, and
#: how much that is depends on timing on the stock comm (how far its last write
#: got). So may a close() while unread bytes are in the receive queue: the kernel
#: then ends with a RST and drops what it has not sent yet. At most this many
#: bytes unread by the peer always reach the peer's
#: kernel when write() returns (loopback delivers into the peer's receive
#: window, 64 KiB at least), so the outcome is fixed; above it the generator
#: offers no abort or reset.
ABORT_SAFE_BYTES = 32 * 1024
#: Bytes written to a side and not read yet, at most: far below asynciocomm's
#: ``read-pause`` (64 MiB), so a write never meets its read backpressure, which
#: is kept on purpose (stock buffers without bound, see compare.SAFER).
UNREAD_CAP = 24 * 1024 * 1024


def other(side: Side) -> Side:
    return "B" if side == "A" else "A"


@dataclass(frozen=True)
class _OnSide:
    """An operation on one side that takes no other argument (subclasses differ by
    type only; the dataclass repr and equality use the subclass)."""

    side: Side


@dataclass(frozen=True)
class Write:
    """``await comm.write(make_message(kind, size, seq))`` on ``side``."""

    side: Side
    kind: str = "dict"
    size: int = 0


class Read(_OnSide):
    """``await comm.read()`` (bounded)."""


class CancelRead(_OnSide):
    """A read started while nothing is coming, cancelled while pending."""


class DoubleRead(_OnSide):
    """Two concurrent ``read()`` calls while nothing is coming."""


class Close(_OnSide):
    """``comm.close()``, started; its outcome is collected at the end (it waits
    for the peer to take a backlog, which the peer may read only later)."""


class Abort(_OnSide):
    """``comm.abort()``."""


class Reset(_OnSide):
    """SO_LINGER 0 on the raw socket, then ``comm.abort()``: the peer gets a RST."""


@dataclass(frozen=True)
class CancelWrite:
    """``comm.write(make_message(kind, size, seq))`` started as a task and
    cancelled after one loop turn."""

    side: Side
    kind: str = "dict"
    size: int = 0


class Writers(_OnSide):
    """Concurrent writers: one task writes an 8 MiB array then a dict, another,
    started once the first has begun, writes a dict. Messages must arrive in
    the order ``write()`` was called."""


class WritesThenClose(_OnSide):
    """Two writers started (an 8 MiB array, then a dict), then ``close()``: it
    delivers both."""


Op = Union[Write, Read, CancelRead, DoubleRead, Close, Abort, Reset, CancelWrite, Writers,
           WritesThenClose]
OPS = (Write, Read, CancelRead, DoubleRead, Close, Abort, Reset, CancelWrite, Writers,
       WritesThenClose)
#: The array the Writers and WritesThenClose steps write first.
WRITERS_LARGE = 8 << 20


@dataclass(frozen=True)
class Sequence:
    """A pair set-up and the operations run on it, in order."""

    setup: str = "plain"
    steps: tuple[Op, ...] = ()

    def __repr__(self) -> str:
        inner = "".join(f"\n    {s!r}," for s in self.steps)
        return f"Sequence(setup={self.setup!r}, steps=({inner}\n))"


def op_text(op: Op) -> str:
    """Short form of an operation for traces: ``A.write(array, 65536)``."""
    name = type(op).__name__.lower()
    if isinstance(op, CancelWrite):
        args = op.kind if op.kind not in SIZED else f"{op.kind}, {op.size}"
        return f"{op.side}.cancelwrite({args})"
    if isinstance(op, Write):
        args = op.kind if op.kind not in SIZED else f"{op.kind}, {op.size}"
        return f"{op.side}.write({args})"
    return f"{op.side}.{name}()"


class Strided:
    """A value whose serializer gives a buffer that is not C-contiguous (every
    other byte of an array), as a user's serializer may."""

    def __init__(self, data: Any) -> None:
        self.data = data


_STRIDED_REGISTERED = False


def _register_strided() -> None:
    global _STRIDED_REGISTERED
    if _STRIDED_REGISTERED:
        return
    from distributed.protocol import dask_deserialize, dask_serialize

    dask_serialize.register(Strided)(lambda x: ({}, [memoryview(x.data)]))
    dask_deserialize.register(Strided)(
        lambda header, frames: bytes(memoryview(frames[0]).cast("B")))
    _STRIDED_REGISTERED = True


def large_size() -> int:
    """An array size above distributed's offload threshold."""
    from distributed.comm.utils import OFFLOAD_THRESHOLD

    return int(OFFLOAD_THRESHOLD or 10 << 20) + (1 << 20)


def make_message(kind: str, size: int, seq: int) -> Any:
    """The message of a Write step: deterministic content from (kind, size, seq)."""
    import pickle

    import numpy as np
    from distributed.protocol import Serialized, serialize, to_serialize
    from distributed.protocol.serialize import Pickled, ToPickle

    if kind == "dict":
        return {"op": "msg", "seq": seq, "x": [1, 2.5, "s", None, b"b"]}
    if kind == "list":
        return [seq, "list", 1, 2, 3]
    if kind == "str":
        return f"message {seq}"
    if kind.startswith("large-"):
        big = to_serialize((np.arange(large_size(), dtype=np.uint64) + seq)
                           .astype(np.uint8).tobytes())
        first = {"large-after-to-pickle": ToPickle(np.arange(100.0) + seq),
                 "large-after-pickled": Pickled({"pickled-obj": pickle.dumps(seq)}, []),
                 "large-after-serialized": Serialized(*serialize(b"s%d" % seq)),
                 "large-after-set": {seq, -1},
                 "large-then-to-pickle": ToPickle(np.arange(100.0) + seq)}[kind]
        if kind == "large-then-to-pickle":
            return {"seq": seq, "a": big, "b": first}
        return {"seq": seq, "b": first, "a": big}
    data = (np.arange(size, dtype=np.uint64) * 2654435761 + seq).astype(np.uint8)
    if kind == "array":
        return {"seq": seq, "a": to_serialize(data)}
    if kind == "frames":
        parts = [to_serialize(data[i::3].copy()) for i in range(3)]
        return {"seq": seq, "parts": parts, "tail": to_serialize(data[:7].copy())}
    if kind == "serialized":
        return {"seq": seq, "s": Serialized(*serialize(data.tobytes()))}
    if kind == "bytes":
        return {"seq": seq, "b": data.tobytes()}
    if kind == "strided":
        _register_strided()
        return {"seq": seq, "v": to_serialize(Strided(np.repeat(data, 2)[::2]))}
    raise ValueError(f"unknown message kind {kind!r}")


def seq_of(value: Any) -> int | None:
    """The sequence number a message read back carries (see make_message)."""
    if isinstance(value, dict):
        return value.get("seq")
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], int):
        return value[0]
    if isinstance(value, str) and value.startswith("message "):
        return int(value.split()[1])
    return None


def refused(kind: str, size: int) -> bool:
    """Whether the stock comm's write() raises for this message before sending
    anything: a buffer that is not C-contiguous in a message its writer joins."""
    return kind == "strided" and size < 64 * 1024


def message_bytes(op: Write | CancelWrite) -> int:
    """Payload bytes of a Write (what the model counts toward its bounds)."""
    if op.kind in OFFLOADED:
        return large_size()
    return op.size if op.kind in SIZED else 64


@dataclass
class SideState:
    ended: bool = False  # closed, aborted, reset, or failed: closed() is True
    unread: list[int] = field(default_factory=list)  # sizes written to it, not read
    # A cancelled write to this side may or may not have been accepted (a comm
    # with flow control may still have been waiting its turn): what it reads
    # depends on that, so only the final drain reads it.
    uncertain: bool = False


@dataclass
class Model:
    """Stock semantics of a sequence, step by step (see the module docstring)."""

    sides: dict[str, SideState] = field(
        default_factory=lambda: {s: SideState() for s in SIDES})

    def copy(self) -> Model:
        return Model({s: dataclasses.replace(st, unread=list(st.unread))
                      for s, st in self.sides.items()})

    @staticmethod
    def written(op: Op) -> list[int]:
        """Sizes of the messages ``op`` writes, as stock delivers them."""
        if isinstance(op, (Writers, WritesThenClose)):
            if isinstance(op, WritesThenClose):
                return [WRITERS_LARGE, 64]
            return [WRITERS_LARGE, 64, 64]
        if isinstance(op, (Write, CancelWrite)):
            if refused(op.kind, op.size):
                return []
            if isinstance(op, CancelWrite) and op.kind in OFFLOADED:
                return []  # cancelled while it is serialized in the offload thread
            return [message_bytes(op)]
        return []

    def peer_ended(self, side: Side) -> bool:
        return self.sides[other(side)].ended

    def quiet(self, side: Side) -> bool:
        """Nothing to read and nothing coming: a read would wait forever."""
        return not self.sides[side].unread and not self.peer_ended(side)

    def closed_is_free(self, side: Side) -> bool:
        """Whether stock's ``closed()`` of ``side`` depends on timing now.

        It does once the peer has ended and ``side`` has read every message:
        Tornado notices the FIN (or RST) only if it happened to listen for
        reads at that moment (an idle stream with an empty buffer does, one
        whose last read was served inline does not).
        """
        st = self.sides[side]
        return not st.ended and self.peer_ended(side) and not st.unread

    def unread_after_end(self, side: Side) -> bool:
        """The peer has ended and ``side`` still has messages to read: stock's
        ``closed()`` is mostly False then, but True when Tornado was still
        listening for reads as the FIN came (it depends on the reads before;
        see compare.SAFER, ``closed-while-unread``)."""
        st = self.sides[side]
        return not st.ended and self.peer_ended(side) and bool(st.unread)

    def allowed(self, op: Op, open_bugs: frozenset[str] = frozenset()) -> bool:
        """Whether the generator may offer ``op`` now (its stock outcome is fixed).

        ``open_bugs`` names the known divergences not fixed yet
        (``known.OPEN_BUGS``): operations that run into them are left out, so the
        property test checks everything else
        (their minimal repros run strictly in ``test_known_divergences``).
        """
        side = op.side
        me, peer = self.sides[side], self.sides[other(side)]
        if isinstance(op, (Write, CancelWrite, Writers)) or (
                isinstance(op, WritesThenClose) and me.ended):
            # A write to a peer that has ended succeeds or fails depending on
            # whether its RST came back yet: not offered.
            if me.ended:
                return True
            if peer.ended:
                return False
            limit = UNREAD_CAP if "write-waits-for-reader" not in open_bugs else 1024 * 1024
            return sum(peer.unread) + sum(self.written(op)) <= limit
        if isinstance(op, (Read, CancelRead, DoubleRead)) and me.uncertain and not me.ended:
            return False
        if isinstance(op, Read):
            return me.ended or not self.quiet(side)
        if isinstance(op, WritesThenClose):
            # A write and a close: the write rule, then the close rule below.
            limit = UNREAD_CAP if "write-waits-for-reader" not in open_bugs else 1024 * 1024
            if peer.ended or sum(peer.unread) + sum(self.written(op)) > limit:
                return False
            return not me.unread
        if isinstance(op, (CancelRead, DoubleRead)):
            # Both end in an abort of the comm: the abort rule below applies too.
            if me.ended or not self.quiet(side):
                return False
            if isinstance(op, DoubleRead) and "second-read" in open_bugs:
                return False
        elif me.ended:
            return True  # Close, Abort, Reset of an ended comm: no-ops
        elif isinstance(op, Close) and not me.unread:
            return True  # a FIN after all it wrote: nothing is lost
        # An abort, a reset, a cancelled or double read (they abort), and a close
        # with unread bytes in the receive queue (the kernel then answers close()
        # with a RST, dropping its unsent data).
        if "written-before-abort" in open_bugs and peer.unread and not isinstance(op, Close):
            return False
        return sum(peer.unread) <= ABORT_SAFE_BYTES

    def apply(self, op: Op) -> None:
        """Advance the model past ``op`` as stock would run it."""
        side = op.side
        me, peer = self.sides[side], self.sides[other(side)]
        if isinstance(op, (Write, CancelWrite, Writers, WritesThenClose)):
            if not me.ended:
                peer.unread += self.written(op)
                if isinstance(op, CancelWrite):
                    peer.uncertain = True
            if isinstance(op, WritesThenClose):
                me.ended = True
                me.unread.clear()
        elif isinstance(op, Read):
            if me.unread and not me.ended:
                me.unread.pop(0)
            else:
                me.ended = True  # CommClosedError: stock drops its stream
        else:  # the ends; a cancelled or double read aborts the comm too
            me.ended = True
            me.unread.clear()

    def walk(self, steps: tuple[Op, ...]) -> Iterator[tuple[Op, Model]]:
        """Each step with the model *after* it (self is advanced)."""
        for op in steps:
            self.apply(op)
            yield op, self

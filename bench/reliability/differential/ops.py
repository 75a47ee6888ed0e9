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
#: moment (the pattern of issue 16 item 3). See runner._until_handshaking.
SETUPS = ("plain", "stop", "ctx")
#: Message kinds (see :func:`make_message`).
KINDS = ("dict", "list", "str", "array", "frames", "serialized", "bytes")
#: Kinds whose size is a parameter; the others are a few dozen bytes.
SIZED = frozenset({"array", "frames", "serialized", "bytes"})

#: An abort or reset may lose what it leaves in user-space or kernel buffers, and
#: how much that is depends on timing on the stock comm (how far its last write
#: got). So may a close() while unread bytes are in the receive queue: the kernel
#: then ends with a RST and drops what it has not sent yet. At most this many bytes unread by the peer always reach the peer's
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


Op = Union[Write, Read, CancelRead, DoubleRead, Close, Abort, Reset]
OPS = (Write, Read, CancelRead, DoubleRead, Close, Abort, Reset)


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
    if isinstance(op, Write):
        args = op.kind if op.kind not in SIZED else f"{op.kind}, {op.size}"
        return f"{op.side}.write({args})"
    return f"{op.side}.{name}()"


def make_message(kind: str, size: int, seq: int) -> Any:
    """The message of a Write step: deterministic content from (kind, size, seq)."""
    import numpy as np
    from distributed.protocol import Serialized, serialize, to_serialize

    if kind == "dict":
        return {"op": "msg", "seq": seq, "x": [1, 2.5, "s", None, b"b"]}
    if kind == "list":
        return [seq, "list", 1, 2, 3]
    if kind == "str":
        return f"message {seq}"
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
    raise ValueError(f"unknown message kind {kind!r}")


def message_bytes(op: Write) -> int:
    """Payload bytes of a Write (what the model counts toward its bounds)."""
    return op.size if op.kind in SIZED else 64


@dataclass
class SideState:
    ended: bool = False  # closed, aborted, reset, or failed: closed() is True
    unread: list[int] = field(default_factory=list)  # sizes written to it, not read


@dataclass
class Model:
    """Stock semantics of a sequence, step by step (see the module docstring)."""

    sides: dict[str, SideState] = field(
        default_factory=lambda: {s: SideState() for s in SIDES})

    def copy(self) -> Model:
        return Model({s: dataclasses.replace(st, unread=list(st.unread))
                      for s, st in self.sides.items()})

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

    def allowed(self, op: Op, open_bugs: frozenset[int] = frozenset()) -> bool:
        """Whether the generator may offer ``op`` now (its stock outcome is fixed).

        ``open_bugs`` are issue 16 items not fixed yet: operations that run into
        them are left out, so the property test checks everything else
        (their minimal repros run strictly in ``test_known_divergences``).
        """
        side = op.side
        me, peer = self.sides[side], self.sides[other(side)]
        if isinstance(op, Write):
            # A write to a peer that has ended succeeds or fails depending on
            # whether its RST came back yet: not offered.
            if me.ended:
                return True
            if peer.ended:
                return False
            limit = UNREAD_CAP if 4 not in open_bugs else 1024 * 1024
            return sum(peer.unread) + message_bytes(op) <= limit
        if isinstance(op, Read):
            return me.ended or not self.quiet(side)
        if isinstance(op, (CancelRead, DoubleRead)):
            # Both end in an abort of the comm: the abort rule below applies too.
            if me.ended or not self.quiet(side):
                return False
            if isinstance(op, DoubleRead) and 5 in open_bugs:
                return False
        elif me.ended:
            return True  # Close, Abort, Reset of an ended comm: no-ops
        elif isinstance(op, Close) and not me.unread:
            return True  # a FIN after all it wrote: nothing is lost
        # An abort, a reset, a cancelled or double read (they abort), and a close
        # with unread bytes in the receive queue (the kernel then answers close()
        # with a RST, dropping its unsent data).
        if 2 in open_bugs and peer.unread and not isinstance(op, Close):
            return False
        return sum(peer.unread) <= ABORT_SAFE_BYTES

    def apply(self, op: Op) -> None:
        """Advance the model past ``op`` as stock would run it."""
        side = op.side
        me, peer = self.sides[side], self.sides[other(side)]
        if isinstance(op, Write):
            if not me.ended:
                peer.unread.append(message_bytes(op))
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

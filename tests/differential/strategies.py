"""hypothesis strategies: sequences of operations whose stock outcome is fixed.

The generator walks :class:`ops.Model` and offers only what it allows (each rule
there says why the rest would make the stock trace depend on timing). Choices
shrink toward small and simple: the first entry of each list is the simplest.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.differential.ops import (
    KINDS,
    SETUPS,
    SIDES,
    Abort,
    CancelRead,
    CancelWrite,
    Close,
    DoubleRead,
    Model,
    Op,
    Read,
    Reset,
    Sequence,
    Write,
    Writers,
    WritesThenClose,
)

#: Sizes in bytes per sized kind: empty, tiny, around the 16 KiB coalescing and
#: 64 KiB direct-read bounds of asynciocomm, and large (bounded so a run is quick).
SIZES = {
    "array": (0, 1, 100, 16 * 1024, 64 * 1024 + 1, 1 << 20, 4 << 20, 8 << 20),
    "frames": (0, 3000, 300_000, 3 << 20),
    "serialized": (0, 100, 64 * 1024, 1 << 20),
    "bytes": (0, 10, 64 * 1024 - 1, 1 << 20, 16 << 20),
    # Refused by every comm (TypeError) below 64 KiB, copied and delivered above.
    "strided": (1024, 1 << 20),
}
#: Operation types, weighted: mostly writes and reads.
WEIGHTED = (Write, Write, Write, Read, Read, Read, Close, Abort, Reset, CancelRead, DoubleRead,
            CancelWrite, CancelWrite, Writers, WritesThenClose)


@st.composite
def operations(draw: st.DrawFn, model: Model, open_bugs: frozenset[str]) -> Op | None:
    """One operation the model allows now, or None (the drawn one is not)."""
    cls = draw(st.sampled_from(WEIGHTED))
    side = draw(st.sampled_from(SIDES))
    if cls in (Write, CancelWrite):
        kind = draw(st.sampled_from(KINDS))
        size = draw(st.sampled_from(SIZES[kind])) if kind in SIZES else 0
        op: Op = cls(side, kind, size)
    else:
        op = cls(side)
    return op if model.allowed(op, open_bugs) else None


@st.composite
def sequences(draw: st.DrawFn, max_steps: int = 10,
              open_bugs: frozenset[str] = frozenset()) -> Sequence:
    """A set-up and up to ``max_steps`` operations (fewer when some drawn ones
    are not allowed). Set-ups that stop the listener are left out while
    ``stop-in-handshake`` is open."""
    setups = SETUPS if "stop-in-handshake" not in open_bugs else ("plain",)
    setup = draw(st.sampled_from(setups))
    model = Model()
    steps: list[Op] = []
    for _ in range(draw(st.integers(1, max_steps))):
        op = draw(operations(model, open_bugs))
        if op is not None:
            model.apply(op)
            steps.append(op)
    return Sequence(setup, tuple(steps))

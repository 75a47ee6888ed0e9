"""Comparison of two traces, and the differences from stock kept on purpose.

Traces must be equal, entry by entry, except where an entry of :data:`SAFER`
excuses the difference. Each entry says what differs, why it is strictly safer,
and why distributed's code cannot be hurt by it; ``RELIABILITY.md`` ("Differences
from stock kept on purpose") mirrors the list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.reliability.differential.ops import SIDES, Sequence
from bench.reliability.differential.runner import Trace


@dataclass(frozen=True)
class Safer:
    """A difference from stock that is kept: ``applies(where, stock, ours)``
    says whether it excuses one differing entry."""

    name: str
    what: str
    why_safer: str
    why_harmless: str
    applies: Callable[[str, str, str], bool]


#: The differences kept on purpose (see the module docstring).
SAFER: tuple[Safer, ...] = ()


def _entries(trace: Trace) -> list[tuple[str, str]]:
    out = [("connect", trace.connect), ("B handed", str(trace.handed))]
    for i, (op, result, closed) in enumerate(trace.steps):
        out.append((f"step {i} {op}", result))
        out.append((f"step {i} {op} closed", closed))
    for s in SIDES:
        out += [(f"drain {s} #{i}", got) for i, got in enumerate(trace.received[s])]
    out += [(f"ending #{i}", e) for i, e in enumerate(trace.ending)]
    return out


def differences(stock: Trace, ours: Trace) -> list[str]:
    """Every entry where ``ours`` differs from ``stock`` and no SAFER entry
    applies, as readable lines (empty: the traces agree). Entries are matched by
    name (``step 3 B.read()``, ``drain A #0``), so a missing one shifts nothing."""
    a, b = dict(_entries(stock)), dict(_entries(ours))
    out = []
    for where in [*a, *(k for k in b if k not in a)]:
        sa, sb = a.get(where, "<missing>"), b.get(where, "<missing>")
        if sa != sb and not any(s.applies(where, sa, sb) for s in SAFER):
            out.append(f"{where}: stock {sa!r}, ours {sb!r}")
    return out


def report(seq: Sequence, traces: dict[str, Trace], problems: dict[str, list[str]]) -> str:
    """A failing example as a human reads it: the sequence (valid Python, to replay
    with ``runner.run_sequence``), each variant's differences and its trace."""
    out = ["Sequence (replay with bench.reliability.differential.runner.run_sequence):", repr(seq)]
    for name, lines in problems.items():
        if lines:
            out.append(f"\n{name} differs from the reference:")
            out += [f"  {line}" for line in lines]
    for name, trace in traces.items():
        out.append(f"\ntrace of {name}:")
        out += [f"  {line}" for line in trace.lines()]
        out += [f"  . {d}" for d in trace.details]
    return "\n".join(out)

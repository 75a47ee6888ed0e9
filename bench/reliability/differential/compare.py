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


def _closed_while_unread(where: str, stock: str, ours: str) -> bool:
    """Only ``closed()`` marks differ, and each difference is stock ``T*``
    against ours ``F*`` (a side with messages unread after its peer's end)."""
    if not where.endswith(" closed"):
        return False
    pairs = list(zip(stock.split(), ours.split()))
    return len(pairs) == len(stock.split()) == len(ours.split()) and all(
        a == b or (a.endswith("T*") and b == a[:-2] + "F*") for a, b in pairs)


#: The differences kept on purpose (see the module docstring).
SAFER: tuple[Safer, ...] = (
    Safer(
        "closed-while-unread",
        "After the peer closed, aborted or reset, a side that still has complete "
        "messages to read says closed() is False. Stock says so too in most "
        "histories, but True when Tornado happened to be listening for reads as "
        "the FIN or RST came (it then closes the stream with the messages still "
        "in its buffer, and read() still returns them).",
        "distributed's Server._handle_comm loops `while not comm.closed()`: with "
        "stock's True it stops and drops the requests still unread (issue 16 "
        "item 1); with False it handles them, then read() raises CommClosedError "
        "and the loop ends as on stock.",
        "Every read returns the same messages and then the same CommClosedError "
        "on both; write() after the peer's end is not affected (closed() False "
        "only means it is tried, and fails as stock's does); code that polls "
        "closed() only sees the end later by the unread messages' worth.",
        _closed_while_unread,
    ),
)


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

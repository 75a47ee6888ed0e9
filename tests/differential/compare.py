"""Comparison of two traces, and the differences from stock kept on purpose.

Traces must be equal, entry by entry, except where an entry of :data:`SAFER`
excuses the difference. Each entry says what differs, why it is strictly safer,
and why distributed's code cannot be hurt by it; ``RELIABILITY.md`` ("Differences
from stock kept on purpose") mirrors the list.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from tests.differential.ops import SIDES, Sequence, other
from tests.differential.runner import Trace


@dataclass(frozen=True)
class Safer:
    """A difference from stock that is kept: ``applies(where, stock, ours)``
    says whether it excuses one differing entry; ``normalize(stock, ours)``,
    if given, returns stock's trace as it reads once the difference is
    excused, before entries are compared."""

    name: str
    what: str
    why_safer: str
    why_harmless: str
    applies: Callable[[str, str, str], bool]
    normalize: Callable[[Trace, Trace], Trace] | None = None


def _closed_while_unread(where: str, stock: str, ours: str) -> bool:
    """Only ``closed()`` marks differ, and each difference is stock ``T*``
    against ours ``F*`` (a side with messages unread after its peer's end)."""
    if not where.endswith(" closed"):
        return False
    pairs = list(zip(stock.split(), ours.split()))
    return len(pairs) == len(stock.split()) == len(ours.split()) and all(
        a == b or (a.endswith("T*") and b == a[:-2] + "F*") for a, b in pairs)


def _never(where: str, stock: str, ours: str) -> bool:
    return False


def _cancelled_in_its_turn(stock: Trace, ours: Trace) -> Trace:
    """Stock's trace as if each write that ours reports cancelled while it
    waited its turn had been cancelled on stock before it began: that step
    raised CancelledError and its message is not among what the peer drained."""
    adjusted = copy.deepcopy(stock)
    for i, (mine, theirs) in enumerate(zip(stock.steps, ours.steps)):
        op, result, closed = mine
        if ".cancelwrite(" not in op or result != "ok" or theirs[1] != "CancelledError":
            continue
        peer = other(op[0])  # type: ignore[arg-type]
        seqs = adjusted.received_seqs[peer]
        if i in seqs:
            k = seqs.index(i)
            del seqs[k]
            del adjusted.received[peer][k]
        adjusted.steps[i] = (op, "CancelledError", closed)
    return adjusted


def _writers_called_in_their_order(stock: Trace, ours: Trace) -> Trace:
    """Stock's trace as if its concurrent writers had been called in the order
    ours were: their messages drained in that order (each comm delivers in
    the order its writes were called, which the step reports)."""
    adjusted = copy.deepcopy(stock)
    for i, (mine, theirs) in enumerate(zip(stock.steps, ours.steps)):
        op, result, closed = mine
        if ".writers(" not in op or " order " not in result or " order " not in theirs[1]:
            continue
        stock_order = result.split(" order ")[1]
        our_order = theirs[1].split(" order ")[1]
        if stock_order == our_order or result.split(" order ")[0] != theirs[1].split(" order ")[0]:
            continue
        peer = other(op[0])  # type: ignore[arg-type]
        seqs, values = adjusted.received_seqs[peer], adjusted.received[peer]
        at = [k for k, seq in enumerate(seqs) if seq == i]
        by_tag = {int(t): values[k] for t, k in zip(stock_order.strip("[]").split(","), at)}
        for k, tag in zip(at, our_order.strip("[]").split(",")):
            values[k] = by_tag[int(tag)]
        adjusted.steps[i] = (op, theirs[1], closed)
    return adjusted


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
        "stock's True it stops and drops the requests still unread; with False "
        "it handles them, then read() raises CommClosedError "
        "and the loop ends as on stock.",
        "Every read returns the same messages and then the same CommClosedError "
        "on both; write() after the peer's end is not affected (closed() False "
        "only means it is tried, and fails as stock's does); code that polls "
        "closed() only sees the end later by the unread messages' worth.",
        _closed_while_unread,
    ),
    Safer(
        "cancelled-in-its-turn",
        "A write() that waits its turn (more than write-high-water bytes queued "
        "and not yet taken by the kernel, a large message still being handed "
        "over, or writers called before it still waiting) and is cancelled or "
        "times out meanwhile raises CancelledError and sends nothing. Stock never "
        "waits (its buffer has no bound), so the same write returns and is "
        "delivered.",
        "Memory is bounded by the high-water mark, and the writer learns the "
        "truth: CancelledError means nothing of the message was sent, a write "
        "that returned is delivered, and no other writer or message is touched "
        "(the comm stays open, the order of the others is kept).",
        "Where distributed cancels a write (a timeout around an RPC, a closing "
        "server cancelling its handlers), it gives up on that exchange and "
        "aborts or drops the comm, as it does when stock's offloaded "
        "serialization is cancelled; it never assumes a cancelled write was sent.",
        _never,
        _cancelled_in_its_turn,
    ),
    Safer(
        "writers-in-their-order",
        "Concurrent writers: one task writes a large message and then another, "
        "a second task writes one meanwhile. When the large write waits its turn, "
        "the second task's write is called before the first task's next one, "
        "and messages leave in that order; stock, whose writes never wait, "
        "calls and sends the first task's two messages back to back.",
        "Both deliver in the order write() was called, which is the only order "
        "concurrent writers can rely on; a write waits only where stock would "
        "have buffered without bound.",
        "distributed's writers each wait for their own write; none relies on "
        "another task's write overtaking or not overtaking its own.",
        _never,
        _writers_called_in_their_order,
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
    for safer in SAFER:
        if safer.normalize is not None:
            stock = safer.normalize(stock, ours)
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
    out = ["Sequence (replay with tests.differential.runner.run_sequence):", repr(seq)]
    for name, lines in problems.items():
        if lines:
            out.append(f"\n{name} differs from the reference:")
            out += [f"  {line}" for line in lines]
    for name, trace in traces.items():
        out.append(f"\ntrace of {name}:")
        out += [f"  {line}" for line in trace.lines()]
        out += [f"  . {d}" for d in trace.details]
    return "\n".join(out)

"""The sweep every suite runs: repetitions of all its configurations, within a
time budget, with what failed recorded and the run going on.

A suite runs each configuration once per repetition, so that a drift of the
machine's load touches every configuration alike, and starts no repetition that
would likely end after its budget (judged by the mean of those done). Its section
of the result document then says how many repetitions ran (``reps_done``),
whether the budget cut the run (``truncated``), what failed (``errors``) and how
long it took (``seconds``), in the same form in every suite.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def alternating(items: Sequence[T], index: int) -> list[T]:
    """``items`` in their order at an even ``index``, reversed at an odd one: the
    ABBA order of every paired measurement here, so that over an even number of
    rounds each item goes first, and last, equally often, and a drift of the
    machine's load (or a cache warmed by whoever ran before) touches all alike."""
    return list(items) if index % 2 == 0 else list(reversed(items))


def over_budget(started: float, rep: int, budget_s: float) -> bool:
    """Whether repetition ``rep`` (0-based) would end past the time budget, judged
    by the mean duration of the repetitions done since ``started`` (monotonic)."""
    elapsed = time.monotonic() - started
    return bool(rep) and elapsed * (rep + 1) / rep > budget_s


class Sweep:
    """``reps`` repetitions named ``unit`` within ``budget_s`` seconds from now."""

    def __init__(self, name: str, reps: int, budget_s: float, unit: str = "repetitions") -> None:
        self.name = name
        self.reps = reps
        self.budget_s = budget_s
        self.unit = unit
        self.started = time.monotonic()
        self.reps_done = 0
        self.truncated = False
        self.errors: list[dict[str, Any]] = []

    def repetitions(self, log: Callable[[str], None]) -> Iterator[int]:
        """The repetitions (0-based) to run; a repetition counts as done when the
        next one is asked for, and the budget is judged before each starts."""
        for rep in range(self.reps):
            if over_budget(self.started, rep, self.budget_s):
                self.truncated = True
                log(f"{self.name}: time budget reached after {rep} {self.unit}")
                return
            yield rep
            self.reps_done = rep + 1

    def failed(self, rep: int, config: str, exc: BaseException, *, cut: int | None = None,
               **extra: Any) -> None:
        """Record a failed configuration (called in its ``except`` block, for the
        traceback); ``cut`` bounds the message, ``extra`` goes after the config."""
        self.errors.append({"rep": rep, "config": config, **extra,
                            "error": f"{type(exc).__name__}: {exc}"[:cut],
                            "traceback": traceback.format_exc(limit=6)})

    def seconds(self) -> float:
        """Seconds since the sweep was made."""
        return time.monotonic() - self.started

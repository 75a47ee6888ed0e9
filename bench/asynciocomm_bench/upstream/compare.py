"""Test by test: the takeover's outcome against the stock comm's, on each loop.

The stock run is the oracle. A test that fails with the stock comm is not the
transport's to fix (version skew between the source tree and the installed
release, a missing optional package, a flaky test): it is reported as failing on
both when it fails with the takeover too. A test whose outcome differs between
the two comms on a loop is a difference; it is run again on both comms to tell a
consistent difference from a flaky test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from asynciocomm_bench.upstream.runs import Outcome, Run

#: The classes of a test, in the order the report lists them.
CLASSES = ("passed on both", "failed on both", "skipped on both", "differs")


@dataclasses.dataclass
class Verdict:
    """One test on one loop: both comms' outcomes, its class, and the reruns."""

    test: str
    loop: str
    stock: Outcome
    takeover: Outcome
    reruns: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def klass(self) -> str:
        a, b = self.stock.kind, self.takeover.kind
        if a != b:
            return "differs"
        return {"passed": "passed on both", "skipped": "skipped on both"}.get(
            a, "failed on both")

    @property
    def consistent(self) -> bool | None:
        """Whether every rerun repeated the difference (None: no rerun)."""
        if not self.reruns:
            return None
        return all(k == self.stock.kind for k in self.reruns.get("stock", [])) and all(
            k == self.takeover.kind for k in self.reruns.get("takeover", []))

    def to_json(self) -> dict[str, Any]:
        return {"test": self.test, "loop": self.loop, "class": self.klass,
                "stock": dataclasses.asdict(self.stock),
                "takeover": dataclasses.asdict(self.takeover),
                "reruns": self.reruns, "consistent": self.consistent}


def module_of(test: str) -> str:
    """The test module's path of a test id (``path::name``)."""
    return test.split("::", 1)[0]


def verdicts(runs: Iterable[Run]) -> list[Verdict]:
    """Every test seen on a loop, stock against takeover, sorted by loop and test.
    A test one run did not report is ``missing`` there."""
    by_key = {(r.comm, r.loop): r for r in runs}
    out = []
    for loop in dict.fromkeys(loop for _, loop in by_key):
        stock, takeover = by_key.get(("stock", loop)), by_key.get(("takeover", loop))
        if stock is None or takeover is None:
            continue
        for test in sorted(set(stock.outcomes) | set(takeover.outcomes)):
            out.append(Verdict(test, loop, stock.outcomes.get(test, Outcome("missing")),
                               takeover.outcomes.get(test, Outcome("missing"))))
    return out


def add_reruns(found: list[Verdict], reruns: Iterable[Run]) -> None:
    """Record, for each difference, the kind of outcome of each rerun."""
    index = {(v.test, v.loop): v for v in found if v.klass == "differs"}
    for run in reruns:
        for test, outcome in run.outcomes.items():
            v = index.get((test, run.loop))
            if v is not None:
                v.reruns.setdefault(run.comm, []).append(outcome.kind)
        for (test, loop), v in index.items():  # a rerun that died reported nothing
            if loop == run.loop and test not in run.outcomes:
                v.reruns.setdefault(run.comm, []).append("missing")


def counts(found: list[Verdict]) -> dict[tuple[str, str], dict[str, int]]:
    """Tests per class, for each (module, loop)."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for v in found:
        row = out.setdefault((module_of(v.test), v.loop), dict.fromkeys(CLASSES, 0))
        row[v.klass] += 1
    return out

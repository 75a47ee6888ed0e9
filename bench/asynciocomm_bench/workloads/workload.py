"""What a workload of ``workloads`` is, and the sizing every one of them shares.

The workload modules (``futures``, ``arrays``, ``frames``, ``stealing``) each
define theirs with these; :mod:`asynciocomm_bench.workloads.catalog` lists them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from asynciocomm_bench.workloads.answers import Answer

Params = dict[str, Any]

#: At or below this scale a workload takes its small form (fewer rows per
#: partition, smaller fields), which the warm-ups and the tests run.
SMALL = 0.05


@dataclasses.dataclass(frozen=True)
class Workload:
    """One user workload."""

    name: str
    family: str
    #: What it does at scale 1, for the report.
    what: str
    size: Callable[[float], Params]
    run: Callable[[Any, Params], Any]
    answer: Callable[[Any, Any, Params], Answer]
    expected: Callable[[Params], Answer]


def identity_answer(client: Any, handle: Any, p: Params) -> Answer:
    """For workloads whose timed part already returns the answer."""
    return dict(handle)


def scaled(base: float, scale: float, floor: int) -> int:
    """``base × scale``, rounded, at least ``floor``."""
    return max(floor, int(round(base * scale)))

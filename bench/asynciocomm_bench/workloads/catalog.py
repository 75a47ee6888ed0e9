"""The workloads of ``workloads``: what each computes, at which size, and its answer.

A workload is written from the description of a public Dask benchmark (the
shapes, chunking and operations of coiled/benchmarks' ``tests/benchmarks``),
sized so that one run takes seconds on 2 cores and 2 workers, and scaled by
``--scale`` for a bigger machine: data volumes and task counts grow linearly
with it, with a floor that keeps the smallest scale (the tests') meaningful.

Each one has three parts: ``run(client, p)``, the timed computation (it returns
what ``answer`` needs); ``answer(client, handle, p)``, its fingerprint
(:mod:`asynciocomm_bench.workloads.answers`), untimed; and ``expected(p)``, the right answer,
from a closed form or from dask's local threaded scheduler on the same graph
(task-based where the run uses P2P).
"""

from __future__ import annotations

from asynciocomm_bench.workloads.workload import Workload


def all_workloads() -> list[Workload]:
    """Every workload, in the report's order."""
    from asynciocomm_bench.workloads import arrays, frames, futures, stealing

    return [*futures.WORKLOADS, *arrays.WORKLOADS, *frames.WORKLOADS,
            *stealing.WORKLOADS]


def select(names: list[str] | None) -> list[Workload]:
    """The named workloads in catalog order (all when ``names`` is empty)."""
    from asynciocomm_bench.common.options import BenchError

    every = all_workloads()
    if not names:
        return every
    known = {w.name for w in every}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BenchError(f"workloads: unknown workload {', '.join(unknown)}; "
                         f"choose from {', '.join(w.name for w in every)}")
    return [w for w in every if w.name in names]


def by_name(name: str) -> Workload:
    """One workload by name."""
    return select([name])[0]

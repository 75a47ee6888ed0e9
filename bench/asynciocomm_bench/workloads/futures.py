"""Futures workloads: many single round trips, and one large ``client.map``.

From coiled/benchmarks' ``test_futures.py``: ``test_single_future`` (how quickly
one tiny computation comes back) and ``test_large_map`` (``client.map`` of
``inc`` over 100,000 integers, then wait). The single future is repeated in a
loop, one after the other, so that its round trip can be timed. Both are bound
by round trips, not CPU: on this 2-core machine, with the scheduler, the
nannies and the client sharing one event-loop thread and 2 single-thread
workers, a task of the map costs about 5 ms of wall time (3 ms of that thread's
CPU), so the map has 1,500 tasks (about 8 s) where coiled's 20 threads had
100,000.
"""

from __future__ import annotations

from typing import Any

from asynciocomm_bench.workloads.answers import Answer
from asynciocomm_bench.workloads.workload import Params, Workload, identity_answer, scaled


def inc(x: int) -> int:
    """x + 1 (a module function, so workers unpickle it by reference)."""
    return x + 1


def _rounds(scale: float) -> Params:
    return {"n": scaled(150, scale, 5)}


def _single_run(client: Any, p: Params) -> Answer:
    total = 0
    for i in range(p["n"]):
        total += client.submit(inc, i, pure=False).result()
    return {"n": p["n"], "total": total}


def _inc_total(p: Params) -> Answer:
    n = p["n"]
    return {"n": n, "total": n * (n + 1) // 2}


def _map_size(scale: float) -> Params:
    return {"n": scaled(1500, scale, 20)}


def _map_run(client: Any, p: Params) -> Any:
    from distributed import wait

    futures = client.map(inc, range(p["n"]))
    wait(futures)
    return futures


def _map_answer(client: Any, futures: Any, p: Params) -> Answer:
    values = client.gather(futures)
    return {"n": len(values), "total": sum(values)}


WORKLOADS = [
    Workload("single_future", "futures",
             "150 × submit(inc) then result(), one at a time", _rounds, _single_run,
             identity_answer, _inc_total),
    Workload("large_map", "futures", "client.map(inc, range(1,500)), then wait",
             _map_size, _map_run, _map_answer, _inc_total),
]

"""Work-stealing workloads, from coiled/benchmarks' ``test_work_stealing.py``.

- ``trivial_fanout``: one task makes 1 MiB, and thousands of trivial tasks read it
  (there: 10,000 tasks on 20 threads; here 2,000 on 2, about 12 s: each costs
  about 6 ms of wall time on this machine, see :mod:`asynciocomm_bench.workloads.futures`;
  ``--scale 10`` makes it 20,000);
- ``stealing_inhomogeneous``: 500 tasks (here 250) that sleep for lognormal(1, 1.3) seconds
  (seed 42, at most 60 s), here scaled by ``SLEEP_SCALE`` to fit 2 single-thread
  workers;
- ``stealing_straggler``: 1,000 tasks (here 200) of a fixed sleep while one worker's event
  loop is blocked 1 s in every 1.5 s (a periodic callback), here both scaled by
  ``SLEEP_SCALE``-like factors.

Sleeps stand for work that holds a worker thread without holding the CPU, so
that the wall time is set by scheduling (and stealing), not by the 2 cores.
"""

from __future__ import annotations

import time
from typing import Any

from asynciocomm_bench.workloads.answers import Answer
from asynciocomm_bench.workloads.workload import Params, Workload, identity_answer, scaled

#: The inhomogeneous delays are scaled from a cluster of 20 threads (mean delay
#: 6.3 s, 500 tasks: 160 s) to 2 threads: 250 tasks in about 3 s.
SLEEP_SCALE = 0.004
#: The straggler's tasks and its clog, scaled together (1 s tasks and a 1 s clog
#: every 1.5 s there) so that the clog still holds a task's length.
STRAGGLER_TASK_S = 0.02
CLOG_EVERY_S, CLOG_FOR_S = 0.03, 0.02
MiB = 1 << 20


def make_root(n: int) -> str:
    """The fan-out's root: ``n`` bytes of text."""
    return "x" * n


def touch(root: str, i: int, size: int) -> int:
    """A trivial task of the fan-out: ``i`` when it read the whole root."""
    return i if len(root) == size else -1


def _fanout_size(scale: float) -> Params:
    return {"n": scaled(2000, scale, 20), "root": MiB}


def _fanout_run(client: Any, p: Params) -> Answer:
    import dask

    root = dask.delayed(make_root)(p["root"], dask_key_name="fanout-root")
    leaves = [dask.delayed(touch)(root, i, p["root"]) for i in range(p["n"])]
    values = client.gather(client.compute(leaves))
    return {"n": len(values), "total": sum(values)}


def _fanout_expected(p: Params) -> Answer:
    n = p["n"]
    return {"n": n, "total": n * (n - 1) // 2}


def clog(seconds: float) -> float:
    """Sleep for ``seconds`` (at most 60 × SLEEP_SCALE) and return them."""
    time.sleep(seconds)
    return seconds


def _delays(n: int) -> list[float]:
    import numpy as np

    rng = np.random.RandomState(42)
    return [min(float(d), 60.0) * SLEEP_SCALE for d in rng.lognormal(1, 1.3, n)]


def _inhomogeneous_size(scale: float) -> Params:
    return {"n": scaled(250, scale, 10)}


def _inhomogeneous_run(client: Any, p: Params) -> Answer:
    import dask

    tasks = [dask.delayed(clog)(d) for d in _delays(p["n"])]
    return {"n": p["n"], "total": sum(client.gather(client.compute(tasks)))}


def _inhomogeneous_expected(p: Params) -> Answer:
    return {"n": p["n"], "total": sum(_delays(p["n"]))}


def slowinc(i: int, delay: float) -> int:
    """i + 1 after ``delay`` seconds."""
    time.sleep(delay)
    return i + 1


def _block_loop() -> None:
    time.sleep(CLOG_FOR_S)


def install_clog(dask_worker: Any) -> None:
    """Block this worker's event loop CLOG_FOR_S in every CLOG_EVERY_S."""
    from tornado.ioloop import PeriodicCallback

    old = dask_worker.periodic_callbacks.pop("bench-clog", None)
    if old is not None:  # the warm-up's: one clog at a time
        old.stop()
    pc = PeriodicCallback(_block_loop, CLOG_EVERY_S * 1000)
    dask_worker.periodic_callbacks["bench-clog"] = pc
    pc.start()


def _straggler_size(scale: float) -> Params:
    return {"n": scaled(200, scale, 10)}


def _straggler_run(client: Any, p: Params) -> Answer:
    import dask

    straggler = sorted(client.scheduler_info()["workers"])[0]
    client.run(install_clog, workers=[straggler])
    tasks = [dask.delayed(slowinc)(i, STRAGGLER_TASK_S) for i in range(p["n"])]
    return {"n": p["n"], "total": sum(client.gather(client.compute(tasks)))}


def _straggler_expected(p: Params) -> Answer:
    n = p["n"]
    return {"n": n, "total": n * (n + 1) // 2}


WORKLOADS = [
    Workload("trivial_fanout", "stealing",
             "one 1 MiB root read by 2,000 trivial tasks", _fanout_size, _fanout_run,
             identity_answer, _fanout_expected),
    Workload("stealing_inhomogeneous", "stealing",
             "250 sleeps of lognormal(1, 1.3) × 0.004 s", _inhomogeneous_size,
             _inhomogeneous_run, identity_answer, _inhomogeneous_expected),
    Workload("stealing_straggler", "stealing",
             "200 sleeps of 20 ms, one worker's loop blocked 20 ms in every 30 ms",
             _straggler_size, _straggler_run, identity_answer, _straggler_expected),
]

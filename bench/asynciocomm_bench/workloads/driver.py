"""One process of ``workloads``: it runs a plan of workload runs on fresh clusters.

    python -m asynciocomm_bench.workloads.driver PLAN.json

The plan names one event loop and a list of runs (workload, scheme). Each run
gets a fresh ``distributed.LocalCluster`` with worker processes on that scheme
(its scheduler and nannies in this process, on the loop thread that
distributed starts, with the client), runs the workload once at a small size
(the warm-up: imports, connections, P2P extensions), waits until the scheduler
holds no task, then times the workload: the wall time seen by the client and
the CPU time of the scheduler's event-loop thread (``time.thread_time`` run on
it). Its answer's fingerprint is taken after the timing.

A run with a ``profile`` path is timed under ``py-spy record`` attached to
this process (speedscope, 100 Hz, idle samples included), from just before the
timed workload to just after it.

With ``"mode": "expected"`` it computes each workload's right answer instead
(:attr:`Workload.expected`), without a cluster.

Each result is one line on stdout, ``RESULT_TAG`` then JSON, as soon as it is
known. A run that outlives the plan's ``timeout_s`` prints its error and ends
the process (``os._exit``), since a stuck cluster may not close; the suite then
stops what is left of the process group and starts a new process for the rest
of the plan.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

RESULT_TAG = "WORKLOADS-RESULT "
#: The warm-up runs the workload at this fraction of the measured scale, in its
#: small form (:data:`asynciocomm_bench.workloads.workload.SMALL`; each size has a floor):
#: enough to import and connect everything, a second or two.
WARM_FRACTION = 0.05
#: Polls (every 50 ms) for the scheduler to forget the warm-up's tasks.
FORGET_POLLS = 400


def emit(row: dict[str, Any]) -> None:
    """One result line."""
    sys.stdout.write(RESULT_TAG + json.dumps(row) + "\n")
    sys.stdout.flush()


def loop_class() -> str:
    """The class of the calling thread's running event loop."""
    cls = type(asyncio.get_running_loop())
    return f"{cls.__module__}.{cls.__qualname__}"


def comm_class(client: Any) -> str:
    """The class of a client's comm to its scheduler: which comm ran."""
    comm = client.scheduler_comm.comm
    return f"{type(comm).__module__}.{type(comm).__qualname__}"


def _ntasks(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


def _listener_classes(dask_scheduler: Any) -> list[str]:
    return sorted({f"{type(lst).__module__}.{type(lst).__qualname__}"
                   for lst in dask_scheduler.listeners})


def forget(client: Any) -> None:
    """Wait (bounded) until the scheduler holds no task."""
    for _ in range(FORGET_POLLS):
        if not client.run_on_scheduler(_ntasks):
            return
        time.sleep(0.05)


def cluster_config(loop: str) -> dict[str, Any]:
    """The dask settings of every run: the loop, and workers forked from a
    forkserver, which starts a cluster in a fraction of a second instead of two
    (the start is not timed; the warm-up imports what the workload needs)."""
    return {"distributed.admin.event-loop": loop,
            "distributed.worker.multiprocessing-method": "forkserver"}


#: Imported by the forkserver that worker processes fork from, so that a fresh
#: worker has them already: the first dataframe task of a fresh cluster took 2-3 s
#: here without them, 0.4-0.7 s with them. distributed's own list is kept.
FORKSERVER_PRELOAD = ["dask.array", "dask.dataframe", "pyarrow",
                      "asynciocomm_bench.workloads.arrays", "asynciocomm_bench.workloads.frames",
                      "asynciocomm_bench.workloads.futures", "asynciocomm_bench.workloads.stealing"]


def _preload_forkserver() -> None:
    """Add FORKSERVER_PRELOAD to distributed's forkserver modules (once, before the
    forkserver starts with the first cluster)."""
    import multiprocessing.forkserver as fs

    from distributed.utils import get_mp_context

    ctx = get_mp_context()  # sets distributed's list the first time
    have = list(getattr(fs._forkserver, "_preload_modules", []) or [])
    ctx.set_forkserver_preload(have + [m for m in FORKSERVER_PRELOAD if m not in have])


def _security(plan: dict[str, Any], scheme: str) -> Any:
    from asynciocomm_bench.common.options import is_tls
    from asynciocomm_bench.common.tlsfiles import TLSFiles

    if not is_tls(scheme):
        return None
    return TLSFiles(**plan["tls"]).security()


def _profiler(plan: dict[str, Any], run: dict[str, Any]) -> Any:
    """``py-spy record`` on this process (the scheduler's), when the run asks."""
    if not run.get("profile"):
        return None
    from pathlib import Path

    from asynciocomm_bench.profile.suite import PySpy

    return PySpy(os.getpid(), Path(run["profile"]), max_s=plan["timeout_s"])


def measure(plan: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """One run: a fresh cluster, the warm-up, the timed workload, its answer."""
    import dask
    from distributed import Client, LocalCluster

    from asynciocomm_bench.workloads.catalog import by_name

    wl = by_name(run["workload"])
    p, warm = wl.size(plan["scale"]), wl.size(plan["scale"] * WARM_FRACTION)
    security = _security(plan, run["scheme"])
    started = time.perf_counter()
    with dask.config.set(cluster_config(plan["loop"])):
        _preload_forkserver()
    with dask.config.set(cluster_config(plan["loop"])), \
            LocalCluster(n_workers=plan["workers"], threads_per_worker=plan["threads"],
                         processes=True, protocol=run["scheme"], security=security,
                         host="127.0.0.1", dashboard_address=":0") as cluster, \
            Client(cluster, security=security) as client:
        client.wait_for_workers(plan["workers"], timeout=60)
        evidence = {
            "scheduler": client.run_on_scheduler(loop_class),
            "workers": sorted(set(client.run(loop_class).values())),
            "scheduler_listeners": client.run_on_scheduler(_listener_classes),
            "client_comm": comm_class(client),
        }
        ready = time.perf_counter()
        wl.answer(client, wl.run(client, warm), warm)
        forget(client)
        warmed = time.perf_counter()
        gc.collect()
        spy = _profiler(plan, run)
        cpu0 = client.run_on_scheduler(time.thread_time)
        t0 = time.perf_counter()
        try:
            handle = wl.run(client, p)
            wall = time.perf_counter() - t0
            cpu1 = client.run_on_scheduler(time.thread_time)
        finally:
            if spy is not None:
                spy.stop()
        answer = wl.answer(client, handle, p)
        del handle
        answered = time.perf_counter()
    phases = {"start": ready - started, "warm_up": warmed - ready,
              "answer": answered - t0 - wall, "close": time.perf_counter() - answered}
    return {**run, "wall_s": wall, "loop_cpu_s": cpu1 - cpu0, "answer": answer,
            "evidence": evidence, "params": {k: str(v) for k, v in p.items()},
            "phases_s": phases}


def expected(plan: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The right answer of one workload at the plan's scale."""
    from asynciocomm_bench.workloads.catalog import by_name

    wl = by_name(run["workload"])
    t0 = time.perf_counter()
    answer = wl.expected(wl.size(plan["scale"]))
    return {**run, "answer": answer, "seconds": time.perf_counter() - t0}


def _watchdog(run: dict[str, Any], timeout: float) -> threading.Timer:
    def expire() -> None:
        emit({**run, "error": f"TimeoutError: no result within {timeout:.0f} s"})
        os._exit(3)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    return timer


def main(argv: list[str]) -> int:
    """Run the plan in ``argv[0]`` (a JSON file)."""
    with open(argv[0]) as f:
        plan = json.load(f)
    step = expected if plan.get("mode") == "expected" else measure
    for run in plan["runs"]:
        timer = _watchdog(run, plan["timeout_s"])
        try:
            emit(step(plan, run))
        except Exception as exc:
            emit({**run, "error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc(limit=8)})
        finally:
            timer.cancel()
        gc.collect()
    return 0


if __name__ == "__main__":
    from asynciocomm_bench.scale.lifeline import die_with_parent

    die_with_parent()
    sys.exit(main(sys.argv[1:]))

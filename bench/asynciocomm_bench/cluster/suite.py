"""``cluster``: scheduler-bound workloads on real local clusters, A/B.

Each repetition starts a fresh cluster per configuration (scheme@loop),
runs every workload with the scheduler's GC on and/or off, and records
wall time, tasks/s, the scheduler process CPU (psutil) and the CPU of the
scheduler's event-loop thread (``time.thread_time`` via run_on_scheduler).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from asynciocomm_bench.cluster import workloads
from asynciocomm_bench.cluster.procs import LocalCluster
from asynciocomm_bench.common.loops import run_on_loop
from asynciocomm_bench.common.options import (
    REFERENCE_SCHEME,
    ClusterBounds,
    is_tls,
    reference_loop,
    stock_peer,
    stock_scheme,
)
from asynciocomm_bench.common.progress import Bar
from asynciocomm_bench.common.stats import summarize
from asynciocomm_bench.common.sweep import Sweep
from asynciocomm_bench.common.tlsfiles import TLSFiles, make_tls_files

STATS = {
    "tps": ("throughput", "tasks/s", True),
    "wall_s": ("wall time", "s", False),
    "sched_cpu_us": ("scheduler process CPU per task", "µs", False),
    "loop_cpu_us": ("scheduler event-loop CPU per task", "µs", False),
}


def sizes(bounds: ClusterBounds) -> dict[str, int]:
    """Workload sizes of a bound preset."""
    return {"wide": bounds.wide, "tree": bounds.tree, "shuffle": bounds.shuffle}


def metrics_for(names: list[str], gcs: list[bool]) -> dict[str, dict[str, Any]]:
    """Metric metadata: one row per workload × GC setting × statistic."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        for stat, (title, unit, higher) in STATS.items():
            for g in gcs:
                tag = "gc_on" if g else "gc_off"
                out[f"{name}_{tag}_{stat}"] = {
                    "title": f"{name}, GC {'on' if g else 'off'}: {title}",
                    "unit": unit, "higher_is_better": higher,
                    "plot": stat in ("tps", "loop_cpu_us")}
    return out


async def make_client(cluster: LocalCluster, tls: TLSFiles | None) -> Any:
    """An asynchronous Client connected to the cluster, waiting for its workers."""
    from distributed import Client

    security = tls.security() if (tls and is_tls(cluster.scheme)) else None
    client = await Client(cluster.address, asynchronous=True, security=security,
                          timeout=60)
    return client


async def wait_workers(client: Any, n: int, timeout: float = 60) -> None:
    """Wait for ``n`` workers, bounded in time."""
    await asyncio.wait_for(client.wait_for_workers(n), timeout)


async def run_workload(client: Any, cluster: LocalCluster, wl: workloads.Workload,
                       gc_on: bool, timeout: float) -> dict[str, float]:
    """Run one workload once and measure it; raises on a wrong result."""
    await client.run_on_scheduler(gc.collect)
    await client.run_on_scheduler(gc.enable if gc_on else gc.disable)
    proc = psutil.Process(cluster.scheduler_pid)
    c0 = proc.cpu_times()
    l0 = await client.run_on_scheduler(workloads.loop_cpu)
    t0 = time.perf_counter()
    fut = client.get(wl.dsk, wl.key, sync=False)
    try:
        result = await asyncio.wait_for(fut, timeout)
    finally:
        del fut
    wall = time.perf_counter() - t0
    l1 = await client.run_on_scheduler(workloads.loop_cpu)
    c1 = proc.cpu_times()
    await client.run_on_scheduler(gc.enable)
    if result != wl.expected:
        raise RuntimeError(f"{wl.name}: result {result} != expected {wl.expected}")
    # let the scheduler forget the graph before the next measurement (bounded)
    for _ in range(200):
        left = await client.run_on_scheduler(_ntasks)
        if not left:
            break
        await asyncio.sleep(0.05)
    cpu = (c1.user + c1.system) - (c0.user + c0.system)
    return {"tps": wl.ntasks / wall, "wall_s": wall,
            "sched_cpu_us": cpu / wl.ntasks * 1e6,
            "loop_cpu_us": (l1 - l0) / wl.ntasks * 1e6}


def _ntasks(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


def run_one(scheme: str, loop: str, bounds: ClusterBounds, gcs: list[bool],
            wls: list[workloads.Workload], tls: TLSFiles | None, workdir: Path,
            bar: Bar) -> tuple[dict[str, float], dict[str, Any]]:
    """Start a cluster, run every workload × GC setting, stop it."""
    with LocalCluster(scheme, loop, bounds.workers, bounds.threads, workdir,
                      tls if is_tls(scheme) else None) as cluster:
        async def main() -> tuple[dict[str, float], dict[str, Any]]:
            client = await make_client(cluster, tls)
            try:
                await wait_workers(client, bounds.workers)
                classes = {
                    "scheduler": await client.run_on_scheduler(workloads.loop_class),
                    "workers": sorted(set((await client.run(workloads.loop_class)).values())),
                    "client": workloads.loop_class(),
                }
                out: dict[str, float] = {}
                for g in gcs:
                    for wl in wls:
                        tag = "gc_on" if g else "gc_off"
                        res = await run_workload(client, cluster, wl, g,
                                                 bounds.workload_timeout_s)
                        out.update({f"{wl.name}_{tag}_{k}": v for k, v in res.items()})
                        bar.advance()
                return out, classes
            finally:
                await client.close()

        try:
            return run_on_loop(main, loop)
        except Exception as exc:
            raise RuntimeError(f"{type(exc).__name__}: {exc} | scheduler log: "
                               f"{cluster.log_tail('scheduler', 5)}") from exc


def run_cluster(schemes: list[str], loops: list[str], bounds: ClusterBounds,
                gcs: list[bool], *, quiet: bool = False) -> dict[str, Any]:
    """Run the cluster suite and return its JSON section."""
    configs = [(REFERENCE_SCHEME, reference_loop(loops))]
    for s in dict.fromkeys([REFERENCE_SCHEME, *map(stock_scheme, schemes), *schemes]):
        for lp in loops:
            if (s, lp) not in configs:
                configs.append((s, lp))
    labels = [f"{s}@{lp}" for s, lp in configs]
    wls = workloads.build(sizes(bounds))
    metrics = metrics_for([w.name for w in wls], gcs)
    samples: list[dict[str, Any]] = []
    loop_classes: dict[str, Any] = {}
    sweep = Sweep("cluster", bounds.reps, bounds.budget_s)
    with tempfile.TemporaryDirectory(prefix="asynciocomm-bench-cluster-") as tmp:
        tls = make_tls_files(Path(tmp) / "tls") if any(is_tls(s) for s, _ in configs) else None
        total = bounds.reps * len(configs) * len(gcs) * len(wls)
        with Bar(total, "cluster", quiet) as bar:
            for rep in sweep.repetitions(bar.log):
                for (scheme, loop), label in zip(configs, labels):
                    bar.describe(f"rep {rep + 1}/{bounds.reps} {label}")
                    try:
                        values, classes = run_one(scheme, loop, bounds, gcs, wls, tls,
                                                  Path(tmp) / f"{label}-{rep}", bar)
                    except Exception as exc:
                        sweep.failed(rep, label, exc)
                        bar.log(f"cluster {label} failed: {str(exc)[:300]}", error=True)
                        continue
                    loop_classes[label] = classes
                    samples += [{"rep": rep, "config": label, "metric": k,
                                 "value": float(v)} for k, v in values.items()]
    peers = {lab: stock_peer("comm", s, lp, is_tls(s)) for (s, lp), lab in zip(configs, labels)}
    same_loop = {lab: peer for lab, peer in peers.items() if peer in labels}
    reference = labels[0]
    return {
        "configs": [{"label": lab, "scheme": s, "loop": lp}
                    for (s, lp), lab in zip(configs, labels)],
        "reference": reference,
        "same_loop_refs": same_loop,
        "metrics": metrics,
        "samples": samples,
        "summary": summarize(samples, metrics, reference, same_loop),
        "loop_classes": loop_classes,
        "workloads": {w.name: w.ntasks for w in wls},
        "bounds": dataclasses.asdict(bounds),
        "gc": ["on" if g else "off" for g in gcs],
        "reps_done": sweep.reps_done,
        "truncated": sweep.truncated,
        "errors": sweep.errors,
        "seconds": sweep.seconds(),
    }

"""``gc``: what the scheduler's garbage collector does per 1,000 tasks, A/B.

Each repetition starts, for every scheme@loop, with and without the draft, a
fresh local cluster (a scheduler and ``workers`` worker processes), runs a
warm-up map, then the measured map of ``tasks`` tasks twice: once with
:mod:`asynciocomm_bench.gc.probe` in ``timing`` mode (collections, GC CPU, pauses), once in
``attribution`` mode (the cyclic garbage, its cycles and who made them, the
BatchedSend timeouts per batch). Configurations interleave, in reverse order
on every other repetition, and every ratio is paired within a repetition.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from asynciocomm_bench.cluster.procs import LocalCluster
from asynciocomm_bench.common.loops import run_on_loop
from asynciocomm_bench.common.options import is_tls, stock_scheme
from asynciocomm_bench.common.progress import Bar
from asynciocomm_bench.common.stats import summarize
from asynciocomm_bench.common.sweep import Sweep, alternating
from asynciocomm_bench.common.tlsfiles import TLSFiles, make_tls_files
from asynciocomm_bench.gc import metrics, probe
from asynciocomm_bench.gc.configs import label, order_configs


@dataclasses.dataclass(frozen=True)
class GCBounds:
    """Sizes, repetitions and time limits of ``gc``."""

    reps: int
    workers: int
    threads: int
    tasks: int
    warmup: int = 500
    start_timeout_s: float = 60.0
    workload_timeout_s: float = 300.0
    budget_s: float = 3600.0


PRESETS: dict[str, GCBounds] = {
    # The measurement that motivated the bench: 4 workers, a map of 20,000 tasks.
    "full": GCBounds(reps=3, workers=4, threads=1, tasks=20_000),
    "quick": GCBounds(reps=3, workers=4, threads=1, tasks=5_000, budget_s=900.0),
    # Inside ``all``: plain tcp and asyncio, both loops, with and without the
    # draft: 24 clusters. 2,000-task maps keep a cluster near 30 s (a 5,000-task
    # one is half as long again), so that the part fits in about 12 minutes.
    "all": GCBounds(reps=3, workers=4, threads=1, tasks=2_000, budget_s=900.0),
    "smoke": GCBounds(reps=1, workers=2, threads=1, tasks=500, warmup=100, budget_s=300.0),
}


#: distributed's default ``worker-saturation``, which the cluster bench sets to
#: ``inf`` (every task goes to a worker at once, in a few large batches). With
#: the default, the scheduler sends work as workers finish it, in many small
#: batches, as on a user's cluster: those batches make the garbage measured here.
WORKER_SATURATION = "1.1"


class _Cluster(LocalCluster):
    """A LocalCluster with distributed's default worker saturation, whose
    processes get ``pythonpath`` first on PYTHONPATH."""

    def __init__(self, *args: Any, pythonpath: str | None = None, **kw: Any) -> None:
        self._pythonpath = pythonpath
        super().__init__(*args, **kw)

    def _popen(self, args: list[str], name: str) -> Any:
        import os

        # environment variables override the cluster's dask config file
        self.env["DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION"] = WORKER_SATURATION
        if self._pythonpath:
            rest = self.env.get("PYTHONPATH")
            self.env["PYTHONPATH"] = os.pathsep.join(p for p in (self._pythonpath, rest) if p)
            self._pythonpath = None
        return super()._popen(args, name)


async def _forget(client: Any) -> None:
    for _ in range(400):
        if not await client.run_on_scheduler(_ntasks):
            return
        await asyncio.sleep(0.05)


def _ntasks(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


async def measure(client: Any, tasks: int, timeout: float,
                  attribution: bool) -> dict[str, Any]:
    """One measured map of ``tasks`` tasks with the probe on the scheduler."""
    from asynciocomm_bench.scale import graphs

    await client.run_on_scheduler(probe.start, attribution=attribution)
    try:
        futures = await asyncio.wait_for(graphs.submit_map(client, tasks), timeout)
    finally:
        result: dict[str, Any] = await client.run_on_scheduler(probe.stop)
    await graphs.check_map(client, futures)
    del futures
    await _forget(client)
    return result


async def measure_both(client: Any, tasks: int, warmup: int,
                       timeout: float) -> tuple[dict[str, float], dict[str, Any]]:
    """Warm up, then a timing run and an attribution run; the per-1,000-task
    values and the attribution's cycle kinds."""
    from asynciocomm_bench.scale import graphs

    await graphs.check_map(client, await graphs.submit_map(client, warmup))
    await _forget(client)
    timing = await measure(client, tasks, timeout, attribution=False)
    attrib = await measure(client, tasks, timeout, attribution=True)
    return metrics.values(timing, attrib, tasks), metrics.details(attrib, tasks)


def run_one(scheme: str, loop: str, draft_path: str | None, bounds: GCBounds,
            tls: TLSFiles | None, workdir: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """Start a cluster, measure it, stop it."""
    from asynciocomm_bench.cluster.suite import make_client, wait_workers

    with _Cluster(scheme, loop, bounds.workers, bounds.threads, workdir,
                  tls if is_tls(scheme) else None, bounds.start_timeout_s,
                  pythonpath=draft_path) as cluster:
        async def main() -> tuple[dict[str, float], dict[str, Any]]:
            client = await make_client(cluster, tls)
            try:
                await wait_workers(client, bounds.workers, bounds.start_timeout_s)
                return await measure_both(client, bounds.tasks, bounds.warmup,
                                          bounds.workload_timeout_s)
            finally:
                await client.close()

        try:
            return run_on_loop(main, loop)
        except Exception as exc:
            raise RuntimeError(f"{type(exc).__name__}: {exc} | scheduler log: "
                               f"{cluster.log_tail('scheduler', 5)}") from exc


def run_gc(schemes: list[str], loops: list[str], bounds: GCBounds, *,
           drafts: list[bool], quiet: bool = False, local: bool = True,
           scale_workers: list[int] | None = None,
           scale_tasks: int = 20_000) -> dict[str, Any]:
    """Run the suite and return its JSON section ``gc``: the local cluster
    (unless not ``local``), then the scale clusters of ``scale_workers``."""
    from asynciocomm_bench.gc import draft as drafting

    configs = order_configs(schemes, loops, drafts)
    labels = [label(*c) for c in configs]
    samples: list[dict[str, Any]] = []
    details: dict[str, list[dict[str, Any]]] = {}
    sweep = Sweep("gc", bounds.reps if local else 0, bounds.budget_s)
    errors = sweep.errors
    with tempfile.TemporaryDirectory(prefix="asynciocomm-bench-gc-") as tmp:
        tls = make_tls_files(Path(tmp) / "tls") if any(is_tls(s) for s in schemes) else None
        tree = str(drafting.patched_tree(Path(tmp) / "draft")) if any(drafts) else None
        with Bar(bounds.reps * len(configs) if local else 0, "gc", quiet) as bar:
            for rep in sweep.repetitions(bar.log):
                pairs = list(zip(configs, labels))
                for (scheme, loop, d), lab in alternating(pairs, rep):
                    bar.describe(f"rep {rep + 1}/{bounds.reps} {lab}")
                    try:
                        values, det = run_one(scheme, loop, tree if d else None, bounds,
                                              tls, Path(tmp) / f"{lab}-{rep}")
                    except Exception as exc:
                        sweep.failed(rep, lab, exc, cut=2000)
                        bar.log(f"gc {lab} failed: {str(exc)[:300]}", error=True)
                        bar.advance()
                        continue
                    bar.advance()
                    details.setdefault(lab, []).append({"rep": rep, **det})
                    samples += [{"rep": rep, "config": lab, "metric": k, "value": float(v)}
                                for k, v in values.items()]
        reps_done = sweep.reps_done
        extra: dict[str, Any] = {"bounds": dataclasses.asdict(bounds) if local else {}}
        if scale_workers:
            from asynciocomm_bench.gc import scale

            more, det, errs, net = scale.run_scale(
                schemes, loops, scale_workers, drafts, bounds.reps, scale_tasks, tree,
                Path(tmp), bounds.budget_s, quiet)
            samples += more
            details.update(det)
            errors += errs
            reps_done = max(reps_done, 1 + max((s["rep"] for s in more), default=-1))
            extra.update(scale_workers=scale_workers, scale_tasks=scale_tasks,
                         scale_hosts=scale.HOSTS, **net)
    return section(configs, labels, samples, details, errors, reps_done, sweep.truncated,
                   sweep.seconds(), extra)


def section(configs: list[tuple[str, str, bool]], labels: list[str],
            samples: list[dict[str, Any]], details: dict[str, Any],
            errors: list[dict[str, Any]], reps_done: int, truncated: bool,
            seconds: float, extra: dict[str, Any]) -> dict[str, Any]:
    """The JSON section ``gc`` from its samples."""
    same_loop = {lab: label(stock_scheme(s), lp, d) for (s, lp, d), lab in zip(configs, labels)}
    meta = metrics.metrics(extra.get("scale_workers"))
    return {
        "configs": [{"label": lab, "scheme": s, "loop": lp, "draft": d,
                     "stock": stock_scheme(s)} for (s, lp, d), lab in zip(configs, labels)],
        "reference": labels[0],
        "same_loop_refs": same_loop,
        "draft_refs": {lab: label(s, lp, False) for (s, lp, d), lab in zip(configs, labels)
                       if d and label(s, lp, False) in labels},
        "metrics": meta,
        "samples": samples,
        "summary": summarize(samples, meta, labels[0], same_loop),
        "details": details,
        "errors": errors,
        "reps_done": reps_done,
        "truncated": truncated,
        "seconds": seconds,
        **extra,
    }

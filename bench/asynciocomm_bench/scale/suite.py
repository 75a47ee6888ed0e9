"""``scale``: many workers on separate hosts, stock comms against asynciocomm.

One repetition starts, for every worker count W and every scheme@loop in turn,
a fresh cluster (:mod:`asynciocomm_bench.scale.runner`): a scheduler host, a client host and
up to ``hosts`` worker hosts, each a network namespace on one bridge
(:mod:`asynciocomm_bench.scale.netns`), or loopback when namespaces cannot be made. The
repetitions interleave every configuration, and each ratio against stock is
paired within a repetition. In the last repetition, at the largest W, the map
workload runs once more under py-spy on the scheduler, for every scheme@loop.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.options import stock_scheme
from asynciocomm_bench.common.progress import Bar
from asynciocomm_bench.common.stats import summarize
from asynciocomm_bench.common.sweep import Sweep
from asynciocomm_bench.common.tlsfiles import make_host_tls
from asynciocomm_bench.scale import categories, metrics, netns
from asynciocomm_bench.scale.graphs import Sizes
from asynciocomm_bench.scale.runner import RunBounds, run_cluster


@dataclasses.dataclass(frozen=True)
class ScaleBounds:
    """Sizes, repetitions and time limits of ``scale``."""

    reps: int
    workers: tuple[int, ...]
    hosts: int
    sizes: Sizes
    run: RunBounds
    budget_s: float
    profile: bool = True
    profile_rate: int = 100
    #: the worker counts at which the graph workloads (all but ``map``) run;
    #: None: every one
    graph_workers: tuple[int, ...] | None = None

    def workloads_at(self, workers: int) -> list[str]:
        """The workloads of a cluster of ``workers`` workers."""
        graphs_too = self.graph_workers is None or workers in self.graph_workers
        return [n for n in self.sizes.names() if n == "map" or graphs_too]


def order_configs(schemes: list[str], loops: list[str]) -> list[tuple[str, str]]:
    """scheme@loop pairs, each stock comm right before the asynciocomm one."""
    ordered = sorted(schemes, key=lambda s: (stock_scheme(s), s != stock_scheme(s)))
    return [(s, lp) for lp in loops for s in ordered]


def host_names(nhosts: int) -> list[str]:
    """The scheduler host ``s``, the client host ``c``, worker hosts ``h0``..."""
    return ["s", "c", *[f"h{i}" for i in range(nhosts)]]


def run_scale(schemes: list[str], loops: list[str], bounds: ScaleBounds, outdir: Path,
              *, loopback: bool = False, quiet: bool = False) -> dict[str, Any]:
    """Run the sweep and return the JSON section ``scale``."""
    configs = order_configs(schemes, loops)
    labels = [f"{s}@{lp}" for s, lp in configs]
    names = bounds.sizes.names()
    samples: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    profiles: list[dict[str, Any]] = []
    loop_classes: dict[str, Any] = {}
    raw = outdir / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    sweep = Sweep("scale", bounds.reps, bounds.budget_s)
    errors = sweep.errors
    wmax = max(bounds.workers)
    total = bounds.reps * len(bounds.workers) * len(configs)
    with tempfile.TemporaryDirectory(prefix="asynciocomm-bench-scale-") as tmp, \
            netns.network(host_names(bounds.hosts), loopback=loopback) as (hosts, fallback), \
            Bar(total, "scale", quiet) as bar:
        log = bar.log
        if fallback:
            log(f"scale: no network namespaces ({fallback}); every host is on loopback")
        tls = make_host_tls(Path(tmp) / "tls", {h: [x.address] for h, x in hosts.items()}) \
            if any(s.endswith("tls") for s in schemes) else None
        for rep in sweep.repetitions(log):
            for w in bounds.workers:
                for (scheme, loop), label in zip(configs, labels):
                    prof = None
                    if bounds.profile and w == wmax and rep == bounds.reps - 1:
                        tag = label.replace("+", "_").replace("@", "_")
                        prof = {"workload": "map", "rate": bounds.profile_rate,
                                "native": True,
                                "output": str(raw / f"speedscope-scale-{tag}-w{w}.json")}
                    bar.describe(f"rep {rep + 1}/{bounds.reps}, {w} workers, {label}")
                    t0 = time.monotonic()
                    try:
                        out = run_cluster(scheme, loop, w, hosts, tls,
                                          Path(tmp) / f"{label}-w{w}-{rep}", bounds.sizes,
                                          bounds.run, profile=prof,
                                          workloads=bounds.workloads_at(w))
                    except Exception as exc:
                        bar.advance()
                        sweep.failed(rep, label, exc, cut=2000, workers=w)
                        log(f"scale: {label} at {w} workers failed: {str(exc)[:300]}")
                        continue
                    bar.advance()
                    runs.append({"rep": rep, "config": label, "workers": w,
                                 "seconds": time.monotonic() - t0, "hosts": out["hosts"]})
                    loop_classes[label] = out.get("loop_classes")
                    for e in out["errors"]:
                        errors.append({"rep": rep, "config": label, "workers": w, **e,
                                       "scheduler_log": out.get("scheduler_log")})
                        log(f"scale: {label} at {w} workers, {e['workload']}: "
                            f"{e['error'][:300]}")
                    for wl, values in out["values"].items():
                        samples += [{"rep": rep, "config": label,
                                     "metric": metrics.metric_name(wl, w, k),
                                     "value": float(v)} for k, v in values.items()]
                    if out.get("profile"):
                        profiles.append(_profile_entry(label, scheme, loop, w, out["profile"]))
    same_loop = {lab: f"{stock_scheme(s)}@{lp}" for (s, lp), lab in zip(configs, labels)}
    metric_meta = metrics.metrics_for(names, list(bounds.workers))
    return {
        "configs": [{"label": lab, "scheme": s, "loop": lp, "stock": stock_scheme(s)}
                    for (s, lp), lab in zip(configs, labels)],
        "reference": labels[0],
        "same_loop_refs": same_loop,
        "metrics": metric_meta,
        "samples": samples,
        "summary": summarize(samples, metric_meta, labels[0], same_loop),
        "workloads": names,
        "workers": list(bounds.workers),
        "graph_workers": list(bounds.graph_workers or bounds.workers),
        "hosts": bounds.hosts,
        "network": "loopback" if fallback else "namespaces",
        "network_note": fallback,
        "sizes": dataclasses.asdict(bounds.sizes),
        "reps_done": sweep.reps_done,
        "truncated": sweep.truncated,
        "runs": runs,
        "profiles": profiles,
        "loop_classes": loop_classes,
        "errors": errors,
        "seconds": sweep.seconds(),
    }


def _profile_entry(label: str, scheme: str, loop: str, workers: int,
                   prof: dict[str, Any]) -> dict[str, Any]:
    from asynciocomm_bench.profile import speedscope

    path = Path(prof["speedscope"])
    entry: dict[str, Any] = {"config": label, "scheme": scheme, "loop": loop,
                             "workers": workers, "workload": prof["workload"],
                             "speedscope": path.name, "values": prof["values"]}
    try:
        entry.update(categories.analyze(speedscope.load(path)))
    except (OSError, ValueError) as exc:
        entry["error"] = f"{type(exc).__name__}: {exc}"
    return entry

"""``gc --scale-workers W,...``: the collector at 64 and 256 workers on separate hosts.

Each cluster is a scale cluster (:mod:`asynciocomm_bench.scale.runner`: a scheduler host,
a client host and worker hosts in network namespaces, or loopback when they
cannot be made). The driver runs the map workload with the probe in timing
mode (as every ``scale`` run does), then once more in attribution mode. With
the draft, every host's processes run the patched distributed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asynciocomm_bench.common.progress import Bar
from asynciocomm_bench.common.sweep import Sweep, alternating
from asynciocomm_bench.gc import metrics
from asynciocomm_bench.gc.configs import label, order_configs

#: Hosts of worker processes: W/4 workers each, as the scale bench's ``full``.
HOSTS = 4


def run_scale(schemes: list[str], loops: list[str], workers: list[int], drafts: list[bool],
              reps: int, tasks: int, tree: str | None, tmp: Path, budget_s: float,
              quiet: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any],
                                            list[dict[str, Any]], dict[str, Any]]:
    """Samples, details, errors and the network note of the scale part."""
    from asynciocomm_bench.common.tlsfiles import make_host_tls
    from asynciocomm_bench.scale import netns
    from asynciocomm_bench.scale.graphs import Sizes
    from asynciocomm_bench.scale.runner import RunBounds, run_cluster
    from asynciocomm_bench.scale.suite import host_names

    configs = order_configs(schemes, loops, drafts)
    sizes = Sizes(map=tasks, wide=0, tree=0, shuffle=0, graph_width=0)
    bounds = RunBounds(start_timeout_s=300, workload_timeout_s=600)
    samples: list[dict[str, Any]] = []
    details: dict[str, Any] = {}
    sweep = Sweep("gc scale", reps, budget_s)
    with netns.network(host_names(HOSTS)) as (hosts, fallback), \
            Bar(reps * len(workers) * len(configs), "gc scale", quiet) as bar:
        tls = make_host_tls(tmp / "tls-hosts", {h: [x.address] for h, x in hosts.items()}) \
            if any(s.endswith("tls") for s in schemes) else None
        for rep in sweep.repetitions(bar.log):
            for w in workers:
                for scheme, loop, d in alternating(configs, rep):
                    lab = label(scheme, loop, d)
                    bar.describe(f"rep {rep + 1}/{reps}, {w} workers, {lab}")
                    try:
                        out = run_cluster(scheme, loop, w, hosts, tls,
                                          tmp / f"scale-{lab}-w{w}-{rep}", sizes, bounds,
                                          workloads=["map"], pythonpath=tree if d else None,
                                          gc_attribution=True)
                        if out["errors"]:
                            raise RuntimeError(out["errors"][0]["error"])
                        values = metrics.from_scale(out["values"]["map"],
                                                    out["gc_attribution"], tasks)
                    except Exception as exc:
                        sweep.failed(rep, lab, exc, cut=2000, workers=w)
                        bar.log(f"gc scale {lab} at {w} failed: {str(exc)[:300]}", error=True)
                        bar.advance()
                        continue
                    bar.advance()
                    details.setdefault(f"{lab} w{w}", []).append(
                        {"rep": rep, **metrics.details(out["gc_attribution"], tasks)})
                    samples += [{"rep": rep, "config": lab,
                                 "metric": metrics.scaled(w, k), "value": float(v)}
                                for k, v in values.items()]
    network = {"network": "loopback" if fallback else "namespaces", "network_note": fallback}
    return samples, details, sweep.errors, network

"""Warm A/B of workloads: both comms' clusters alive at once, runs alternating.

``asynciocomm-bench workloads`` times every run on a fresh cluster, as a user's
script meets one. On a machine whose fresh memory is slow to touch (a VM whose
host backs guest pages lazily, as this one), the first run of a pair can take up
to several times the second for the workloads that move hundreds of MiB, and
that order effect can hide or fake a comm's difference in 3 pairs. This module
answers the narrower question "on warm clusters, is one comm slower?": one
``LocalCluster`` per comm, started once, each workload warmed up twice on each,
then ``n`` rounds that run it on both, the order alternating per round.

Each run gets data of its own (the workload's ``seed`` parameter, where it has
one, differs per run and comm): dask caches what it learnt about a collection
(a dataframe's divisions) in the client's process, so a second run on the same
data would skip work the first did.

``python -m asynciocomm_bench.workloads.warm WORKLOADS LOOP ROUNDS [--tls]
[--scale S]`` prints one JSON line per workload: the times of both comms, the
median of the paired ratios (stock / asynciocomm: > 1 means asynciocomm is
faster) and their range.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from typing import Any

#: Warm-up runs of each workload on each cluster before the timed rounds (the
#: first run imports and compiles what the workload needs).
WARM_RUNS = 2
#: Seeds of the timed runs start here; warm-ups use seeds below it.
SEED_BASE = 1000


def _params(base: dict[str, Any], seed: int) -> dict[str, Any]:
    return {**base, "seed": seed} if "seed" in base else base


def warm_ab(workloads: list[str], loop: str, rounds: int, tls: bool = False,
            scale: float = 1.0, workers: int = 2) -> list[dict[str, Any]]:
    """The warm A/B of each workload (see the module docstring)."""
    import dask
    from distributed import Client, LocalCluster

    from asynciocomm_bench.common.stats import Comparison
    from asynciocomm_bench.common.sweep import alternating
    from asynciocomm_bench.common.tlsfiles import make_tls_files
    from asynciocomm_bench.workloads.catalog import by_name
    from asynciocomm_bench.workloads.driver import cluster_config, comm_class
    from asynciocomm_bench.workloads.suite import group_schemes

    schemes = dict(zip(("stock", "asynciocomm"), group_schemes(tls)))
    out = []
    with tempfile.TemporaryDirectory(prefix="warm-tls-") as tmp, \
            dask.config.set(cluster_config(loop)):
        security = make_tls_files(tmp).security() if tls else None
        clusters: dict[str, tuple[Any, Any]] = {}
        try:
            for side, scheme in schemes.items():
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       protocol=scheme, security=security, host="127.0.0.1",
                                       dashboard_address=":0")
                clusters[side] = (cluster, Client(cluster, security=security))
                clusters[side][1].wait_for_workers(workers, timeout=60)
            comms = {side: comm_class(client) for side, (_, client) in clusters.items()}
            for name in workloads:
                wl = by_name(name)
                base = wl.size(scale)
                for k, (_, client) in enumerate(clusters.values()):
                    for w in range(WARM_RUNS):
                        wl.answer(client, wl.run(client, _params(base, 100 * k + w)), base)
                times: dict[str, list[float]] = {side: [] for side in clusters}
                for i in range(rounds):
                    for side in alternating(list(clusters), i):
                        client = clusters[side][1]
                        p = _params(base, SEED_BASE + 2 * i + (side == "asynciocomm"))
                        gc.collect()
                        t0 = time.perf_counter()
                        wl.run(client, p)
                        times[side].append(time.perf_counter() - t0)
                paired = Comparison(tuple(a / b for a, b in
                                          zip(times["stock"], times["asynciocomm"])))
                out.append({"workload": name, "loop": loop, "tls": tls, "rounds": rounds,
                            "schemes": schemes, "comms": comms, "stock_s": times["stock"],
                            "asynciocomm_s": times["asynciocomm"],
                            "median_ratio": paired.median,
                            "ratio_range": [paired.lo, paired.hi]})
        finally:
            for cluster, client in clusters.values():
                client.close()
                cluster.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m asynciocomm_bench.workloads.warm",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("workloads", help="comma-separated workload names")
    ap.add_argument("loop", choices=["asyncio", "uvloop"])
    ap.add_argument("rounds", type=int)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args(argv)
    for row in warm_ab(args.workloads.split(","), args.loop, args.rounds, args.tls, args.scale):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

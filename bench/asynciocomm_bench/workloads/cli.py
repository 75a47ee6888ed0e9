"""The ``workloads`` subcommand: options, the run, and its report."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.options import BenchError, check_loops

#: Time budget of the default run (seconds): no pair starts that would likely end
#: after it. The default run (4 loop × security groups, 3 pairs, scale 1) is
#: sized for about 12 minutes a pair on this machine; this fits 3 pairs of up to
#: 20 minutes.
BUDGET_S = 3600.0
#: A run (cluster, warm-up, workload, answer) that takes longer failed.
TIMEOUT_S = 300.0


def _security(text: str) -> list[bool]:
    out = []
    for t in (x.strip() for x in text.split(",")):
        if t not in ("plain", "tls"):
            raise BenchError(f"workloads: --security takes plain, tls or plain,tls; got {t!r}")
        out.append(t == "tls")
    return list(dict.fromkeys(out))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``workloads`` on an argparse subparsers object."""
    from asynciocomm_bench.workloads import suite

    doc = "real user workloads (arrays, rechunks, dataframes, futures, stealing), A/B"
    p = subparsers.add_parser("workloads", help=doc, description=suite.__doc__)
    p.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    p.add_argument("--loops", default="asyncio,uvloop", help="event loops: asyncio, uvloop")
    p.add_argument("--security", default="plain,tls",
                   help="plain (tcp vs asyncio), tls (tls vs asyncio+tls), or both")
    p.add_argument("--pairs", type=int, default=3, help="ABBA pairs per workload")
    p.add_argument("--scale", type=float, default=1.0,
                   help="data and task counts relative to the 2-core default")
    p.add_argument("--workers", type=int, default=2, help="worker processes per cluster")
    p.add_argument("--threads", type=int, default=1, help="threads per worker")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per run")
    p.add_argument("--budget", type=float, default=BUDGET_S,
                   help="no pair starts that would likely end after this (seconds)")
    p.add_argument("--profile", action="store_true",
                   help="after the pairs, one more run of each workload and comm under "
                        "py-spy (speedscope files and the scheduler loop's categories)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default ./bench-results/workloads-<timestamp>)")
    p.add_argument("--logs", action="store_true",
                   help="keep the driver logs in the output directory")
    p.add_argument("--quiet", action="store_true", help="no progress and no report on stdout")
    p.add_argument("--no-plots", action="store_true", help="skip PNG plots")
    return p


def run(args: argparse.Namespace) -> Path:
    """Run the suite, write results.json, report.md and the plots."""
    from asynciocomm_bench.common import environment, results
    from asynciocomm_bench.report.publish import publish
    from asynciocomm_bench.workloads import catalog, suite

    wls = catalog.select([n.strip() for n in args.only.split(",") if n.strip()])
    if args.list:
        for w in wls:
            print(f"{w.name:24} {w.family:10} {w.what}")
        return Path(".")
    if args.pairs < 1 or args.scale <= 0 or args.workers < 1 or args.threads < 1:
        raise BenchError("workloads: --pairs, --scale, --workers and --threads must be positive")
    opts = suite.Options(loops=check_loops(args.loops.split(",")),
                         tls=_security(args.security), pairs=args.pairs, scale=args.scale,
                         workers=args.workers, threads=args.threads,
                         timeout_s=args.timeout, budget_s=args.budget,
                         profile=args.profile)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out: Path = args.out or Path("bench-results") / f"workloads-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    doc = results.new_document("workloads")
    with environment.LoadSampler() as load:
        doc["workloads"] = suite.run_workloads(wls, opts, quiet=args.quiet, outdir=out,
                                               logdir=out / "logs" if args.logs else None)
    doc["environment"]["load"] = load.summary()
    publish(doc, out, plots=not args.no_plots, echo=not args.quiet)
    return out

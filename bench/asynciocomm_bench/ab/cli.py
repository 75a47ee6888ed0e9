"""The ``ab`` subcommand: ``asynciocomm-bench ab [OPTIONS] SCRIPT [ARGS...]``."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.options import BenchError, check_loops


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``ab`` on an argparse subparsers object."""
    from asynciocomm_bench.ab import suite

    p = subparsers.add_parser(
        "ab", help="your own script, stock comm against asynciocomm (ABBA pairs)",
        description=suite.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=5,
                   help="pairs of runs (each comm once per pair; 3 or more to measure)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    p.add_argument("--loop", default=None,
                   help="set distributed.admin.event-loop (asyncio or uvloop) for the "
                        "script; default: the script's own config")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter of the script (it must have asynciocomm and this "
                        "bench installed; default: this one)")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default ./bench-results/ab-<timestamp>)")
    p.add_argument("--quiet", action="store_true", help="no progress and no report on stdout")
    p.add_argument("--no-plots", action="store_true", help="skip PNG plots")
    p.add_argument("script", help="the Python script, run as `python SCRIPT ARGS...`")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return p


def run(args: argparse.Namespace) -> Path:
    """Run the pairs; write results.json, report.md, plots and the runs' logs."""
    from asynciocomm_bench.ab import suite
    from asynciocomm_bench.common import environment, results
    from asynciocomm_bench.report.publish import publish

    if args.pairs < 1:
        raise BenchError("ab: --pairs must be at least 1")
    if not Path(args.script).is_file():
        raise BenchError(f"ab: no such script: {args.script}")
    opts = suite.Options(script=args.script, args=list(args.args), pairs=args.pairs,
                         python=args.python, timeout_s=args.timeout,
                         loop=check_loops([args.loop])[0] if args.loop else None)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out: Path = args.out or Path("bench-results") / f"ab-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    doc = results.new_document("ab")
    with environment.LoadSampler() as load:
        doc["ab"] = suite.run_ab(opts, out / "logs", quiet=args.quiet)
    doc["environment"]["load"] = load.summary()
    publish(doc, out, plots=not args.no_plots, echo=not args.quiet)
    return out

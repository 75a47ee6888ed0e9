"""``asynciocomm-bench gc``: the scheduler's garbage collector per 1,000 tasks.

    asynciocomm-bench gc [--size full|quick|smoke] [--schemes tcp,asyncio,tls,asyncio+tls]
        [--loops asyncio,uvloop] [--draft both|off|on] [--reps 3] [--tasks N]
        [--workers 4] [--scale-workers 64,256] [--scale-tasks N] [--no-local] [--out DIR]

``--draft`` runs every configuration also (``both``) or only (``on``) on
distributed built from its sdist with ``patches/0011`` applied (see
:mod:`asynciocomm_bench.gc.draft`); the default, ``both``, shows what the draft changes.
``--scale-workers`` adds clusters of that many workers on separate hosts
(:mod:`asynciocomm_bench.gc.scale`); the ``scale`` subcommand records the timing figures
of its map workload too.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.cliargs import csv
from asynciocomm_bench.common.options import available_default_schemes, check_loops, check_schemes
from asynciocomm_bench.gc.suite import PRESETS, GCBounds

DRAFTS = {"both": [False, True], "off": [False], "on": [True]}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``gc`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "gc", help="the scheduler's garbage collector per 1,000 tasks, with and "
                   "without the BatchedSend draft",
        description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--schemes", type=csv, default=None,
                   help="comma-separated schemes (default: tcp, tls, asyncio, asyncio+tls)")
    p.add_argument("--loops", type=csv, default=None,
                   help="comma-separated loops (default: asyncio, uvloop)")
    p.add_argument("--size", choices=tuple(PRESETS), default="full",
                   help="preset of sizes and repetitions")
    p.add_argument("--reps", type=int, default=None, help="repetitions")
    p.add_argument("--tasks", type=int, default=None, help="tasks of the measured map")
    p.add_argument("--workers", type=int, default=None, help="worker processes")
    p.add_argument("--draft", choices=tuple(DRAFTS), default="both",
                   help="run with patches/0011 applied: both (default), off or on")
    p.add_argument("--scale-workers", type=lambda t: [int(x) for x in csv(t)], default=None,
                   help="also run scale clusters (network namespaces) of these worker "
                        "counts, e.g. 64,256 (heavy: minutes per cluster)")
    p.add_argument("--scale-tasks", type=int, default=20_000,
                   help="tasks of the map at scale")
    p.add_argument("--no-local", action="store_true",
                   help="skip the local 4-worker cluster (with --scale-workers)")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default ./bench-results/gc-<timestamp>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="skip PNG plots")
    return p


def bounds_from(args: argparse.Namespace) -> GCBounds:
    """The preset with the command line's overrides."""
    b = PRESETS[args.size]
    kw = {k: v for k, v in (("reps", args.reps), ("tasks", args.tasks),
                            ("workers", args.workers)) if v is not None}
    return dataclasses.replace(b, **kw)


def run_section(schemes: list[str], loops: list[str], bounds: GCBounds,
                drafts: list[bool], quiet: bool = False, **kw: Any) -> dict[str, Any]:
    """The ``gc`` section of a result document (``kw``: see ``run_gc``)."""
    from asynciocomm_bench.gc.suite import run_gc

    return run_gc(schemes, loops, bounds, drafts=drafts, quiet=quiet, **kw)


def write_report(doc: dict[str, Any], out: Path, no_plots: bool) -> Path:
    """report.md (and the plots) of a document with a ``gc`` section."""
    from asynciocomm_bench.gc import report
    from asynciocomm_bench.report import markdown

    pl = [] if no_plots else report.plots(doc, out)
    head = markdown.render({k: v for k, v in doc.items() if k != "gc"}, {})
    path = out / "report.md"
    path.write_text(head + "\n" + report.render(doc["gc"], pl))
    return path


def run(args: argparse.Namespace) -> Path:
    """Run ``gc``; returns the output directory."""
    from asynciocomm_bench.common import environment, results

    schemes = check_schemes(args.schemes) if args.schemes else available_default_schemes()
    loops = check_loops(args.loops or ["asyncio", "uvloop"])
    bounds = bounds_from(args)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or Path("bench-results") / f"gc-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    doc = results.new_document(f"gc/{args.size}")
    with environment.LoadSampler() as load:
        doc["gc"] = run_section(schemes, loops, bounds, DRAFTS[args.draft], args.quiet,
                                local=not args.no_local, scale_workers=args.scale_workers,
                                scale_tasks=args.scale_tasks)
    doc["environment"]["load"] = load.summary()
    results.save(doc, out)
    path = write_report(doc, out, args.no_plots)
    if not args.quiet:
        print(path.read_text(), end="", flush=True)
    print(f"results: {out / 'results.json'}, report: {path}")
    return out

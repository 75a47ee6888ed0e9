"""``asynciocomm-bench scale``: a scheduler and W workers on separate hosts.

Each host is a network namespace of its own, joined to the others by veth
links to one bridge; W workers run in up to ``--hosts`` processes of W/H
``Worker``s each. Stock ``tcp``/``tls`` against ``asyncio``/``asyncio+tls``,
on both loops, interleaved; then a multi-homed worker check.

    asynciocomm-bench scale [--size full|quick|smoke] [--workers 2,16,64,256]
        [--hosts 4] [--schemes tcp,asyncio,tls,asyncio+tls] [--loops asyncio,uvloop]
        [--reps 3] [--map N] [--no-profile] [--no-multihome] [--loopback] [--out DIR]

Network namespaces need root and ``ip``; without them the bench runs on
loopback and says so in its report.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.cliargs import csv
from asynciocomm_bench.common.options import (
    BenchError,
    available_default_schemes,
    check_loops,
    check_schemes,
)
from asynciocomm_bench.scale.graphs import Sizes
from asynciocomm_bench.scale.runner import RunBounds
from asynciocomm_bench.scale.suite import ScaleBounds

#: Presets. ``full`` is the issue's sweep of the short tasks: 3 repetitions x
#: 4 worker counts x 8 scheme@loop = 96 clusters. On two cores the workers'
#: CPU (2-5x the scheduler's per task) sets the wall time (150-700 tasks/s), so
#: the graph workloads, 23,000 tasks more per cluster, run at 16 and 256
#: workers only: the sweep then takes about 2.5 hours instead of 6.
PRESETS: dict[str, ScaleBounds] = {
    "full": ScaleBounds(reps=3, workers=(2, 16, 64, 256), hosts=4,
                        sizes=Sizes(map=20_000, wide=2000, tree=512, shuffle=16,
                                    graph_width=4000, graph_depth=5),
                        run=RunBounds(start_timeout_s=300, workload_timeout_s=600),
                        budget_s=5 * 3600.0, graph_workers=(16, 256)),
    "quick": ScaleBounds(reps=3, workers=(2, 16), hosts=2,
                         sizes=Sizes(map=5000, wide=2000, tree=512, shuffle=16,
                                     graph_width=1000, graph_depth=4),
                         run=RunBounds(start_timeout_s=120, workload_timeout_s=180),
                         budget_s=1800.0),
    "smoke": ScaleBounds(reps=1, workers=(8,), hosts=2,
                         sizes=Sizes(map=400, wide=0, tree=0, shuffle=0, graph_width=0),
                         run=RunBounds(start_timeout_s=60, workload_timeout_s=60),
                         budget_s=300.0, profile=False),
}
#: ``all`` runs the short tasks at 64 workers on every scheme and loop
#: (24 clusters, about 20 min), with a profile of each.
ALL_PRESET = dataclasses.replace(
    PRESETS["full"], workers=(64,),
    sizes=Sizes(map=20_000, wide=0, tree=0, shuffle=0, graph_width=0),
    budget_s=1500.0)


def _ints(text: str) -> list[int]:
    try:
        return [int(t) for t in csv(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The scale options (also offered by ``all`` under a ``--scale-`` prefix)."""
    p.add_argument("--workers", type=_ints, default=None,
                   help="comma-separated worker counts W (default: the preset's)")
    p.add_argument("--hosts", type=int, default=None,
                   help="worker hosts (processes); W/H workers each")
    p.add_argument("--map", type=int, default=None, help="tasks of the short-task map")
    p.add_argument("--graph-workers", type=_ints, default=None,
                   help="worker counts at which the graph workloads run (default: the "
                        "preset's; 0: none)")
    p.add_argument("--no-profile", action="store_true",
                   help="no py-spy run at the largest W")
    p.add_argument("--no-multihome", action="store_true",
                   help="skip the multi-homed worker check")
    p.add_argument("--loopback", action="store_true",
                   help="no network namespaces, everything on loopback")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``scale`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "scale", help="many workers on separate hosts (network namespaces), over TLS too",
        description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--schemes", type=csv, default=None,
                   help="comma-separated schemes (default: tcp, tls, asyncio, asyncio+tls)")
    p.add_argument("--loops", type=csv, default=None,
                   help="comma-separated loops (default: asyncio, uvloop)")
    p.add_argument("--size", choices=tuple(PRESETS), default="full",
                   help="preset of worker counts, sizes and time bounds")
    p.add_argument("--reps", type=int, default=None, help="repetitions")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default ./bench-results/scale-<timestamp>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="skip PNG plots")
    add_arguments(p)
    return p


def bounds_from(args: argparse.Namespace, base: ScaleBounds) -> ScaleBounds:
    """``base`` with the command line's overrides."""
    b = base
    if args.reps is not None:
        b = dataclasses.replace(b, reps=args.reps)
    if args.workers:
        b = dataclasses.replace(b, workers=tuple(args.workers))
    if args.hosts is not None:
        b = dataclasses.replace(b, hosts=args.hosts)
    if args.map is not None:
        b = dataclasses.replace(b, sizes=dataclasses.replace(b.sizes, map=args.map))
    if args.graph_workers is not None:
        b = dataclasses.replace(b, graph_workers=tuple(args.graph_workers))
    if args.no_profile:
        b = dataclasses.replace(b, profile=False)
    if b.hosts < 1 or min(b.workers) < 1 or b.reps < 1:
        raise BenchError("--hosts, --workers and --reps must be at least 1")
    return b


def run_sections(schemes: list[str], loops: list[str], bounds: ScaleBounds, out: Path, *,
                 loopback: bool = False, multihome: bool = True,
                 quiet: bool = False) -> dict[str, Any]:
    """The ``scale`` and ``multihome`` sections of a run."""
    from asynciocomm_bench.scale import multihome as mh
    from asynciocomm_bench.scale.suite import run_scale

    sections: dict[str, Any] = {"scale": run_scale(schemes, loops, bounds, out,
                                                   loopback=loopback, quiet=quiet)}
    if multihome:
        sections["multihome"] = mh.check(loopback=loopback)
    return sections


def run(args: argparse.Namespace) -> Path:
    """Run ``scale``; returns the output directory."""
    from asynciocomm_bench.common import environment, results
    from asynciocomm_bench.report import markdown, plots

    schemes = check_schemes(args.schemes) if args.schemes else available_default_schemes()
    loops = check_loops(args.loops or ["asyncio", "uvloop"])
    bounds = bounds_from(args, PRESETS[args.size])
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or Path("bench-results") / f"scale-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    doc = results.new_document(f"scale/{args.size}")
    with environment.LoadSampler() as load:
        doc.update(run_sections(schemes, loops, bounds, out, loopback=args.loopback,
                                multihome=not args.no_multihome, quiet=args.quiet))
    doc["environment"]["load"] = load.summary()
    results.save(doc, out)
    pl = {} if args.no_plots else plots.render_all(doc, out)
    (out / "report.md").write_text(markdown.render(doc, pl))
    print(f"results: {out / 'results.json'}, report: {out / 'report.md'}")
    return out

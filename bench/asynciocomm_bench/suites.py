"""The subcommands that run suites into one result document: ``comm``, ``cluster``,
``profile``, ``quick`` (comm and cluster, short) and ``all`` (every suite, with TLS,
the gc part and the scale part)."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import time
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.cliargs import add_document_options, csv
from asynciocomm_bench.common.options import (
    CLUSTER_BOUNDS,
    COMM_BOUNDS,
    COMM_PARTS,
    BenchError,
    available_default_schemes,
    bulk_bounds,
    check_loops,
    check_schemes,
)
from asynciocomm_bench.common.placement import PLACEMENTS, can_split

#: ``all`` starts no cluster repetition that would end after this (seconds), so
#: that the profile runs keep their reserve: comm, cluster and profile, each with
#: the TLS schemes too, are sized to fit in 30 min (comm's budget, cluster's 3
#: repetitions, about 3 min of profile). The gc part
#: (``asynciocomm_bench.gc.suite.PRESETS["all"]``) and the scale part
#: (``asynciocomm_bench.scale.cli.ALL_PRESET``) with the multi-homed check follow,
#: with budgets of their own; the durations measured are in bench/results/.
ALL_DEADLINE_S = 1800.0
PROFILE_RESERVE_S = 180.0

HELPS = {"comm": "comm level: ping, stream, bulk, concurrency, with references",
         "cluster": "scheduler-bound workloads on local clusters",
         "profile": "py-spy on the scheduler during a cluster workload",
         "quick": "ping, stream, 64 KiB and a cluster workload, 3 paired "
                  "repetitions each, in about 2 minutes (the default)",
         "all": "the full run: comm, cluster, profile (each with TLS), gc and scale"}


def _gcs(text: str) -> list[bool]:
    out = []
    for t in csv(text):
        if t not in ("on", "off"):
            raise BenchError(f"--gc takes on, off or on,off; got {t!r}")
        out.append(t == "on")
    return out


def _parts(text: str) -> tuple[str, ...]:
    parts = csv(text)
    for part in parts:
        if part not in COMM_PARTS:
            raise argparse.ArgumentTypeError(
                f"--only takes {', '.join(COMM_PARTS)}; got {part!r}")
    return tuple(p for p in COMM_PARTS if p in parts)


def _sizes(text: str) -> dict[int, tuple[int, float]]:
    from dask.utils import parse_bytes

    try:
        sizes = [parse_bytes(t) for t in csv(text)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--bulk: {exc}") from None
    if not sizes or any(s <= 4096 for s in sizes):
        raise argparse.ArgumentTypeError("--bulk takes sizes above 4 KiB")
    return {s: bulk_bounds(s) for s in sizes}


@dataclasses.dataclass(frozen=True)
class Suite:
    """One suite subcommand; all of them run :func:`run_suites`, which reads the
    subcommand's name to know which suites to run."""

    name: str

    def add_parser(self, subparsers: Any) -> argparse.ArgumentParser:
        """Register this subcommand on an argparse subparsers object."""
        name = self.name
        sp: argparse.ArgumentParser = subparsers.add_parser(
            name, help=HELPS[name], description=HELPS[name])
        add_document_options(sp)
        sp.add_argument("--size", choices=("full", "quick", "smoke"),
                        default="quick" if name == "quick" else "full",
                        help="preset of counts and time bounds")
        sp.add_argument("--reps", type=int, default=None, help="repetitions")
        sp.add_argument("--budget", type=float, default=None,
                        help="seconds: no repetition starts that would likely end after "
                             "this (default: the preset's, grown with --reps); a run of "
                             "other sizes or parts than the preset's may need its own")
        if name in ("comm", "quick", "all"):
            sp.add_argument("--refs", action=argparse.BooleanOptionalAction,
                            default=name != "quick",
                            help="the rawsock / rawaio / rawtask / rawkeep / proto references "
                                 "(default: on, off for quick)")
            sp.add_argument("--cpu-thread", action="store_true",
                            help="a CPU-bound pure-Python thread in every comm server "
                                 "process, as a worker's task threads (GIL hand-offs)")
        if name == "comm":
            sp.add_argument("--placement", choices=PLACEMENTS, default="free",
                            help="free: the kernel places client and server (default); "
                                 "split: client on one CPU, each server on another, as "
                                 "two hosts (needs two CPUs)")
            sp.add_argument("--only", type=_parts, default=None,
                            help="comma-separated parts to run: "
                                 f"{', '.join(COMM_PARTS)} (default: all)")
            sp.add_argument("--bulk", type=_sizes, default=None,
                            help="comma-separated one-way sizes, in dask's units "
                                 "(64KiB,16MiB), instead of the preset's")
        if name in ("cluster", "profile", "quick", "all"):
            sp.add_argument("--gc", type=_gcs, default=None,
                            help="scheduler GC: on, off or on,off")
            sp.add_argument("--workers", type=int, default=None)
            sp.add_argument("--threads", type=int, default=None)
            sp.add_argument("--wide", type=int, default=None, help="tasks of the wide map")
        if name == "all":
            sp.add_argument("--no-scale", action="store_true",
                            help="skip the scale part (many workers on separate hosts)")
        if name in ("profile", "all"):
            sp.add_argument("--tasks", type=int, default=None,
                            help="wide tasks of the profiled workload")
            sp.add_argument("--no-native", action="store_true",
                            help="no native stacks (faster, but GC is invisible)")
        return sp

    def run(self, args: argparse.Namespace) -> Path:
        """Run the suites of this subcommand; returns the output directory."""
        return run_suites(args)


SUITES = tuple(Suite(name) for name in HELPS)


def _defaults(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    quick = args.cmd == "quick"
    if args.schemes is None:
        schemes = [s for s in available_default_schemes()
                   if not quick or s in ("tcp", "asyncio")]
        if args.cmd in ("cluster", "profile"):
            schemes = [s for s in schemes if s in ("tcp", "asyncio")]
    else:
        schemes = check_schemes(args.schemes)
    loops = check_loops(args.loops if args.loops is not None else ["asyncio", "uvloop"])
    if getattr(args, "placement", "free") == "split" and not can_split():
        raise BenchError("--placement split needs two CPUs; this process may use one")
    return schemes, loops


def part_schemes(cmd: str, schemes: list[str]) -> list[str]:
    """The schemes of the cluster and profile parts: all of the run's (TLS too,
    in ``all``), except in ``quick``, which keeps to tcp and asyncio."""
    if cmd != "quick":
        return schemes
    return [s for s in schemes if s in ("tcp", "asyncio")] or schemes


def with_reps(bounds: Any, reps: int | None) -> Any:
    """``bounds`` with ``reps`` repetitions (when given), and a time budget that
    grows with them: more repetitions than the preset's are asked for, so its
    budget, sized for the preset's, must not cut them."""
    if reps is None:
        return bounds
    return _replace(bounds, reps=reps,
                    budget_s=bounds.budget_s * max(1.0, reps / bounds.reps))


def _replace(bounds: Any, **kw: Any) -> Any:
    return dataclasses.replace(bounds, **{k: v for k, v in kw.items() if v is not None})


def comm_bounds(args: argparse.Namespace) -> Any:
    """The comm part's bounds: the preset's, with the options given."""
    return _replace(with_reps(COMM_BOUNDS[args.size], args.reps),
                    parts=getattr(args, "only", None), bulk=getattr(args, "bulk", None),
                    budget_s=getattr(args, "budget", None))


def run_suites(args: argparse.Namespace) -> Path:
    """Run the suites ``args.cmd`` names into one document; returns the output directory."""
    from asynciocomm_bench.common import environment, results
    from asynciocomm_bench.report.cli import render

    schemes, loops = _defaults(args)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out: Path = args.out or Path("bench-results") / stamp
    out.mkdir(parents=True, exist_ok=True)
    size = args.size
    doc = results.new_document(size if args.cmd in ("quick", "all") else f"{args.cmd}/{size}")
    comm_b = comm_bounds(args)
    clus_b = CLUSTER_BOUNDS[size]
    if args.cmd != "comm":
        clus_b = _replace(with_reps(clus_b, args.reps), workers=args.workers,
                          threads=args.threads, wide=args.wide,
                          budget_s=getattr(args, "budget", None))
    gcs = getattr(args, "gc", None) or ([True] if args.cmd == "quick" else [True, False])
    started = time.monotonic()
    with environment.LoadSampler() as load:
        if args.cmd in ("comm", "quick", "all"):
            from asynciocomm_bench.comm.suite import run_comm

            doc["comm"] = run_comm(schemes, loops, comm_b, refs=args.refs, quiet=args.quiet,
                                   cpu_thread=args.cpu_thread,
                                   where=getattr(args, "placement", "free"))
        if args.cmd in ("cluster", "quick", "all"):
            from asynciocomm_bench.cluster.suite import run_cluster

            if args.cmd == "all":
                left = ALL_DEADLINE_S - (time.monotonic() - started) - PROFILE_RESERVE_S
                clus_b = _replace(clus_b, budget_s=max(60.0, left))
            cl_schemes = part_schemes(args.cmd, schemes)
            doc["cluster"] = run_cluster(cl_schemes, loops, clus_b, gcs, quiet=args.quiet)
        if args.cmd in ("profile", "all"):
            from asynciocomm_bench.profile.suite import run_profile

            tasks = args.tasks or {"full": 30000, "quick": 5000, "smoke": 300}[size]
            pr_schemes = part_schemes(args.cmd, schemes)
            pr_loops = loops if args.cmd == "profile" else loops[:1]
            pr_gcs = gcs if args.cmd == "profile" or args.gc else [True]
            doc["profile"] = run_profile(pr_schemes, pr_loops, clus_b, pr_gcs, tasks, out,
                                         native=not args.no_native, quiet=args.quiet)
        if args.cmd == "all":
            from asynciocomm_bench.gc import cli as gc_cli
            from asynciocomm_bench.gc.suite import PRESETS as GC_PRESETS

            doc["gc"] = gc_cli.run_section(
                [s for s in schemes if s in ("tcp", "asyncio")] or schemes, loops,
                GC_PRESETS["all" if size == "full" else "smoke"], [False, True],
                quiet=args.quiet)
        if args.cmd == "all" and not args.no_scale:
            from asynciocomm_bench.scale import cli as scale

            preset = scale.ALL_PRESET if size == "full" else scale.PRESETS["smoke"]
            doc.update(scale.run_sections(schemes, loops, preset, out, quiet=args.quiet))
    doc["environment"]["load"] = load.summary()
    results.save(doc, out)
    md = render(doc, out, args.no_plots)
    (out / "report.md").write_text(md)
    if not args.quiet:
        # The markdown itself, whole: tables keep their width in a pipe, a file or
        # a terminal (which wraps lines and cuts no cell), and report.md is what
        # was printed.
        print("\n" + md, end="", flush=True)
    print(f"results: {out / 'results.json'}, report: {out / 'report.md'}")
    return out

"""The ``asynciocomm-bench`` command line (also ``python -m bench``)."""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from asynciocomm_bench.common.options import (CLUSTER_BOUNDS, COMM_BOUNDS, COMM_PARTS, BenchError,
                                  available_default_schemes, bulk_bounds, check_loops,
                                  check_schemes)

#: The suite subcommands, which share their options and the result document.
SUBCOMMANDS = ("comm", "cluster", "profile", "report", "quick", "all")
#: ``all`` starts no cluster repetition that would end after this (seconds),
#: leaving room for the profile runs: comm, cluster and profile, each with the
#: TLS schemes too, take up to 30 min: comm up to 8 min for its 3 repetitions
#: (385 s on 2026-12-02), cluster 3 repetitions of 4.5-6 min (a 1560 s deadline
#: stopped it at 2 that day), profile about 3 min. The scale part
#: (``asynciocomm_bench.scale.cli.ALL_PRESET``, 11-14 min) and the multi-homed check follow,
#: after the gc part (``asynciocomm_bench.gc.suite.PRESETS["all"]``, about 12 min).
ALL_DEADLINE_S = 1800.0
PROFILE_RESERVE_S = 180.0


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _gcs(text: str) -> list[bool]:
    out = []
    for t in _csv(text):
        if t not in ("on", "off"):
            raise BenchError(f"--gc takes on, off or on,off; got {t!r}")
        out.append(t == "on")
    return out


def _report_input(text: str) -> tuple[Path, tuple[str, ...] | None]:
    """``PATH`` or ``PATH:SECTION,...`` (the sections of that run to take)."""
    from asynciocomm_bench.common.results import SECTIONS

    path, sep, names = text.rpartition(":")
    if not sep or not names or not set(_csv(names)) <= set(SECTIONS):
        return Path(text), None
    return Path(path), tuple(_csv(names))


def _parts(text: str) -> tuple[str, ...]:
    parts = _csv(text)
    for part in parts:
        if part not in COMM_PARTS:
            raise argparse.ArgumentTypeError(
                f"--only takes {', '.join(COMM_PARTS)}; got {part!r}")
    return tuple(p for p in COMM_PARTS if p in parts)


def _sizes(text: str) -> dict[int, tuple[int, float]]:
    from dask.utils import parse_bytes

    try:
        sizes = [parse_bytes(t) for t in _csv(text)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--bulk: {exc}") from None
    if not sizes or any(s <= 4096 for s in sizes):
        raise argparse.ArgumentTypeError("--bulk takes sizes above 4 KiB")
    return {s: bulk_bounds(s) for s in sizes}


def commands() -> dict[str, ModuleType]:
    """The subcommands with a module of their own: each has ``add_parser(subparsers)``
    and ``run(args) -> Path``. A new one is one import and one entry here."""
    from asynciocomm_bench import upstream
    from asynciocomm_bench.ab import cli as ab
    from asynciocomm_bench.comm import between, calls
    from asynciocomm_bench.gc import cli as gc
    from asynciocomm_bench.reliability import differential, suite as reliability
    from asynciocomm_bench.scale import cli as scale
    from asynciocomm_bench.workloads import cli as workloads

    return {"reliability": reliability, "calls": calls, "differential": differential,
            "scale": scale, "between": between, "gc": gc, "workloads": workloads,
            "ab": ab, "upstream": upstream}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    p = argparse.ArgumentParser(
        prog="asynciocomm-bench",
        description="A/B benchmarks of distributed comm backends (default: quick).")
    sub = p.add_subparsers(dest="cmd")
    helps = {"comm": "comm level: ping, stream, bulk, concurrency, with references",
             "cluster": "scheduler-bound workloads on local clusters",
             "profile": "py-spy on the scheduler during a cluster workload",
             "report": "re-render saved results into markdown + PNG",
             "quick": "ping, stream, 64 KiB and a cluster workload, 3 paired "
                      "repetitions each, in about 2 minutes (the default)",
             "all": "the full run: comm, cluster, profile (each with TLS), gc and scale"}
    for name in SUBCOMMANDS:
        sp = sub.add_parser(name, help=helps[name], description=helps[name])
        sp.add_argument("--schemes", type=_csv, default=None,
                        help="comma-separated schemes (tcp, tls, asyncio, asyncio+tls, "
                             "or any distributed.comm.backends entry point)")
        sp.add_argument("--loops", type=_csv, default=None,
                        help="comma-separated event loops: asyncio, uvloop")
        sp.add_argument("--out", type=Path, default=None,
                        help="output directory (default ./bench-results/<timestamp>)")
        sp.add_argument("--quiet", action="store_true",
                        help="no progress and no report on stdout (report.md is written)")
        sp.add_argument("--no-plots", action="store_true", help="skip PNG plots")
        if name == "report":
            sp.add_argument("results", type=_report_input, nargs="+",
                            help="results.json or its directory; several are merged into "
                                 "one report and one results.json in --out (a section "
                                 "of several runs: their samples, each run's "
                                 "repetitions apart). PATH:SECTION,... takes only those "
                                 "sections of that run (comm, cluster, profile, scale, "
                                 "multihome)")
            sp.add_argument("--name", default="report.md", help="markdown file name")
            continue
        sp.add_argument("--size", choices=("full", "quick", "smoke"),
                        default="quick" if name == "quick" else "full",
                        help="preset of counts and time bounds")
        sp.add_argument("--reps", type=int, default=None, help="repetitions")
        if name in ("comm", "quick", "all"):
            sp.add_argument("--refs", action=argparse.BooleanOptionalAction,
                            default=name != "quick",
                            help="the rawsock / rawaio / rawtask / proto references "
                                 "(default: on, off for quick)")
            sp.add_argument("--cpu-thread", action="store_true",
                            help="a CPU-bound pure-Python thread in every comm server "
                                 "process, as a worker's task threads (GIL hand-offs)")
        if name == "comm":
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
    for module in commands().values():
        module.add_parser(sub)
    return p


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
    return schemes, loops


def part_schemes(cmd: str, schemes: list[str]) -> list[str]:
    """The schemes of the cluster and profile parts: all of the run's (TLS too,
    in ``all``), except in ``quick``, which keeps to tcp and asyncio."""
    if cmd != "quick":
        return schemes
    return [s for s in schemes if s in ("tcp", "asyncio")] or schemes


def _with_reps(bounds: Any, reps: int | None) -> Any:
    """``bounds`` with ``reps`` repetitions (when given), and a time budget that
    grows with them: more repetitions than the preset's are asked for, so its
    budget, sized for the preset's, must not cut them."""
    if reps is None:
        return bounds
    return _replace(bounds, reps=reps,
                    budget_s=bounds.budget_s * max(1.0, reps / bounds.reps))


def _replace(bounds: Any, **kw: Any) -> Any:
    import dataclasses

    return dataclasses.replace(bounds, **{k: v for k, v in kw.items() if v is not None})


def render_markdown(doc: dict[str, Any], pl: dict[str, list[str]], out: Path,
                    no_plots: bool) -> str:
    """The report of a document, its ``gc`` section (with its plots) last."""
    from asynciocomm_bench.report import markdown

    md = markdown.render(doc, pl)
    if doc.get("gc"):
        from asynciocomm_bench.gc import report as gc_report

        md += "\n" + gc_report.render(doc["gc"], [] if no_plots
                                        else gc_report.plots(doc, out))
    return md


def run(args: argparse.Namespace) -> Path:
    """Run a subcommand; returns the output directory."""
    from asynciocomm_bench.common import environment, results
    from asynciocomm_bench.report import plots

    own = commands().get(args.cmd)
    if own is not None:
        result: Path = own.run(args)
        return result
    if args.cmd == "report":
        doc = results.merge([results.only(results.load(p), keep) for p, keep in args.results])
        paths = [p for p, _ in args.results]
        out = args.out or (paths[0] if paths[0].is_dir() else paths[0].parent)
        out.mkdir(parents=True, exist_ok=True)
        if len(paths) > 1:  # the merged document, beside its report
            if any(out.resolve() == (p if p.is_dir() else p.parent).resolve()
                   for p in paths):
                raise BenchError("report: --out must not hold one of the merged results")
            results.save(doc, out)
        pl = {} if args.no_plots else plots.render_all(doc, out)
        (out / args.name).write_text(render_markdown(doc, pl, out, args.no_plots))
        print(f"wrote {out / args.name}")
        return out
    schemes, loops = _defaults(args)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or Path("bench-results") / stamp
    out.mkdir(parents=True, exist_ok=True)
    size = args.size
    doc = results.new_document(size if args.cmd in ("quick", "all") else f"{args.cmd}/{size}")
    comm_b = _replace(_with_reps(COMM_BOUNDS[size], args.reps),
                      parts=getattr(args, "only", None), bulk=getattr(args, "bulk", None))
    clus_b = CLUSTER_BOUNDS[size]
    if args.cmd != "comm":
        clus_b = _replace(_with_reps(clus_b, args.reps), workers=args.workers,
                          threads=args.threads, wide=args.wide)
    gcs = getattr(args, "gc", None) or ([True] if args.cmd == "quick" else [True, False])
    started = time.monotonic()
    with environment.LoadSampler() as load:
        if args.cmd in ("comm", "quick", "all"):
            from asynciocomm_bench.comm.suite import run_comm

            doc["comm"] = run_comm(schemes, loops, comm_b, refs=args.refs, quiet=args.quiet,
                                   cpu_thread=args.cpu_thread)
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
    pl = {} if args.no_plots else plots.render_all(doc, out)
    md = render_markdown(doc, pl, out, args.no_plots)
    (out / "report.md").write_text(md)
    if not args.quiet:
        # The markdown itself, whole: tables keep their width in a pipe, a file or
        # a terminal (which wraps lines and cuts no cell), and report.md is what
        # was printed.
        print("\n" + md, end="", flush=True)
    print(f"results: {out / 'results.json'}, report: {out / 'report.md'}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in (*SUBCOMMANDS, *commands(), "-h", "--help"):
        argv = ["quick", *argv]
    args = build_parser().parse_args(argv)
    try:
        run(args)
    except BenchError as exc:
        print(f"asynciocomm-bench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("asynciocomm-bench: interrupted", file=sys.stderr)
        return 130
    return 0

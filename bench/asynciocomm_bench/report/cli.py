"""``report``: saved results re-rendered into markdown and PNG, several runs merged;
and the rendering of a result document that every suite subcommand ends with."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.cliargs import add_document_options, csv
from asynciocomm_bench.common.options import BenchError

HELP = "re-render saved results into markdown + PNG"


def _report_input(text: str) -> tuple[Path, tuple[str, ...] | None]:
    """``PATH`` or ``PATH:SECTION,...`` (the sections of that run to take)."""
    from asynciocomm_bench.common.results import SECTIONS

    path, sep, names = text.rpartition(":")
    if not sep or not names or not set(csv(names)) <= set(SECTIONS):
        return Path(text), None
    return Path(path), tuple(csv(names))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``report`` on an argparse subparsers object."""
    sp: argparse.ArgumentParser = subparsers.add_parser("report", help=HELP, description=HELP)
    add_document_options(sp)
    sp.add_argument("results", type=_report_input, nargs="+",
                    help="results.json or its directory; several are merged into "
                         "one report and one results.json in --out (a section "
                         "of several runs: their samples, each run's "
                         "repetitions apart). PATH:SECTION,... takes only those "
                         "sections of that run (comm, cluster, profile, scale, "
                         "multihome)")
    sp.add_argument("--name", default="report.md", help="markdown file name")
    return sp


def render(doc: dict[str, Any], out: Path, no_plots: bool) -> str:
    """The report of a document with its plots written to ``out``; the ``gc``
    section (with its plots) last."""
    from asynciocomm_bench.report import markdown, plots

    pl = {} if no_plots else plots.render_all(doc, out)
    md = markdown.render(doc, pl)
    if doc.get("gc"):
        from asynciocomm_bench.gc import report as gc_report

        md += "\n" + gc_report.render(doc["gc"], [] if no_plots
                                        else gc_report.plots(doc, out))
    return md


def run(args: argparse.Namespace) -> Path:
    """Render the report of saved results; returns the output directory."""
    from asynciocomm_bench.common import results

    doc = results.merge([results.only(results.load(p), keep) for p, keep in args.results])
    paths = [p for p, _ in args.results]
    out: Path = args.out or (paths[0] if paths[0].is_dir() else paths[0].parent)
    out.mkdir(parents=True, exist_ok=True)
    if len(paths) > 1:  # the merged document, beside its report
        if any(out.resolve() == (p if p.is_dir() else p.parent).resolve() for p in paths):
            raise BenchError("report: --out must not hold one of the merged results")
        results.save(doc, out)
    (out / args.name).write_text(render(doc, out, args.no_plots))
    print(f"wrote {out / args.name}")
    return out

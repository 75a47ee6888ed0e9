"""The ``asynciocomm-bench`` command line (also ``python -m asynciocomm_bench``).

Every subcommand is a :class:`Command`: it registers its parser and runs from the
parsed arguments, returning its output directory. A new subcommand is one entry in
:func:`commands`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Protocol

from asynciocomm_bench.common.options import BenchError


class Command(Protocol):
    """A subcommand: a module or an object with these two functions."""

    def add_parser(self, subparsers: Any) -> argparse.ArgumentParser: ...

    def run(self, args: argparse.Namespace) -> Path: ...


def commands() -> dict[str, Command]:
    """Every subcommand by name, in the order ``--help`` lists them. The imports
    are of the subcommands' command-line modules only; each imports its suite when
    it runs."""
    from asynciocomm_bench import upstream
    from asynciocomm_bench.ab import cli as ab
    from asynciocomm_bench.comm import between, calls
    from asynciocomm_bench.gc import cli as gc
    from asynciocomm_bench.report import cli as report
    from asynciocomm_bench.scale import cli as scale
    from asynciocomm_bench.suites import SUITES
    from asynciocomm_bench.workloads import cli as workloads

    suites: dict[str, Command] = {s.name: s for s in SUITES}
    return {"comm": suites["comm"], "cluster": suites["cluster"],
            "profile": suites["profile"], "report": report,
            "quick": suites["quick"], "all": suites["all"],
            "calls": calls,
            "scale": scale, "between": between, "gc": gc, "workloads": workloads,
            "ab": ab, "upstream": upstream}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    p = argparse.ArgumentParser(
        prog="asynciocomm-bench",
        description="A/B benchmarks of distributed comm backends (default: quick).")
    sub = p.add_subparsers(dest="cmd")
    for command in commands().values():
        command.add_parser(sub)
    return p


def run(args: argparse.Namespace) -> Path:
    """Run a subcommand; returns the output directory."""
    return commands()[args.cmd].run(args)


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in (*commands(), "-h", "--help"):
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

"""Argument types and options that several subcommands share."""

from __future__ import annotations

import argparse
from pathlib import Path


def csv(text: str) -> list[str]:
    """A comma-separated option's values, blanks dropped."""
    return [t.strip() for t in text.split(",") if t.strip()]


def add_document_options(sp: argparse.ArgumentParser) -> None:
    """The options of the subcommands that write one result document and its
    report (the suites, ``quick``, ``all`` and ``report``)."""
    sp.add_argument("--schemes", type=csv, default=None,
                    help="comma-separated schemes (tcp, tls, asyncio, asyncio+tls, "
                         "or any distributed.comm.backends entry point)")
    sp.add_argument("--loops", type=csv, default=None,
                    help="comma-separated event loops: asyncio, uvloop")
    sp.add_argument("--out", type=Path, default=None,
                    help="output directory (default ./bench-results/<timestamp>)")
    sp.add_argument("--quiet", action="store_true",
                    help="no progress and no report on stdout (report.md is written)")
    sp.add_argument("--no-plots", action="store_true", help="skip PNG plots")

"""The progress display: plain lines when the output is not a terminal."""

from __future__ import annotations

import io

from asynciocomm_bench.common.progress import Bar


def test_off_a_terminal_progress_is_plain_lines() -> None:
    out = io.StringIO()
    with Bar(4, "comm", stream=out) as bar:
        bar.describe("rep 1/2 tcp@uvloop")
        bar.advance(2)
        bar.describe("rep 2/2 tcp@uvloop")
        bar.log("comm tcp@uvloop failed: boom", error=True)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("comm: rep 1/2 tcp@uvloop (0/4 steps, ")
    assert lines[1].startswith("comm: rep 2/2 tcp@uvloop (2/4 steps, ")
    assert lines[2] == "comm tcp@uvloop failed: boom"
    assert lines[3].startswith("comm: done in ")
    assert "\x1b" not in out.getvalue()


def test_quiet_prints_nothing() -> None:
    out = io.StringIO()
    with Bar(2, "cluster", quiet=True, stream=out) as bar:
        bar.describe("rep 1/1")
        bar.log("x")
    assert out.getvalue() == ""

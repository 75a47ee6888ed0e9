"""``asynciocomm-bench quick`` as a new user meets it: the console script, stdout a
pipe. Every headline figure is a same-loop ratio with its spread, a ratio whose
spread reaches 1.0 (or that has fewer than 3 pairs) is worded as no difference,
no table cell is cut, and report.md is what the run printed.

The real ``quick`` takes about 2 minutes; this runs it with the smoke preset,
3 repetitions and one loop, through the same headline and formatting code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

RATIO = re.compile(r"^(\d+\.\d\d)× \((\d+\.\d\d)–(\d+\.\d\d)×, (\d+) pairs\)$")
NOISE = re.compile(r"^no measurable difference \((\d+) pairs?\)$")
COLUMN = re.compile(r"^`(\S+)` vs `(\S+)`$")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp("quick")
    script = os.path.join(os.path.dirname(sys.executable), "asynciocomm-bench")
    proc = subprocess.run(
        [script, "quick", "--size", "smoke", "--reps", "3", "--loops", "uvloop",
         "--no-plots", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=out, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, out


def _tables(text: str) -> list[list[list[str]]]:
    """Every markdown table of ``text``: rows of cells, the separator row dropped."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            assert line.endswith("|"), f"a table row is cut: {line!r}"
            cells = [c.strip() for c in line[1:-1].split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def _pairs(sec: dict[str, Any], cfg: str, peer: str, metric: str) -> list[float]:
    """The paired speed-ups, computed here from the samples."""
    vals: dict[str, dict[int, float]] = {cfg: {}, peer: {}}
    for s in sec["samples"]:
        if s["metric"] == metric and s["config"] in vals:
            vals[s["config"]][s["rep"]] = s["value"]
    higher = sec["metrics"][metric].get("higher_is_better", True)
    return [v / vals[peer][r] if higher else vals[peer][r] / v
            for r, v in sorted(vals[cfg].items()) if r in vals[peer]]


def test_the_report_is_what_the_run_printed_whole(run: tuple[str, Path]) -> None:
    stdout, out = run
    assert (out / "report.md").read_text() in stdout
    assert "…" not in stdout and "\x1b[" not in stdout  # nothing cut, no terminal codes
    # the progress display is plain lines (a busy machine's budget may stop a
    # section before its third repetition)
    assert re.search(r"^comm: rep 1/3 asyncio@uvloop \(\d+/\d+ steps, \d+ s\)$", stdout, re.M)
    assert re.search(r"^cluster: done in \d+ s$", stdout, re.M)


def test_no_table_cell_is_cut(run: tuple[str, Path]) -> None:
    tables = _tables(run[0])
    assert len(tables) >= 5  # headline, comm medians and ratios, cluster's two
    for table in tables:
        assert {len(row) for row in table} == {len(table[0])}, table[0]


def test_every_headline_ratio_is_same_loop_with_its_spread(run: tuple[str, Path]) -> None:
    stdout, out = run
    doc = json.loads((out / "results.json").read_text())
    head = stdout.split("## Headline", 1)[1].split("\n## ", 1)[0]
    (table,) = _tables(head)
    columns = [COLUMN.match(h) for h in table[0][1:]]
    assert columns and all(columns), table[0]
    assert [(m[1], m[2]) for m in columns if m] == [("asyncio@uvloop", "tcp@uvloop")]
    titles = {f"{meta['title']}, {meta['unit']}": (name, metric)
              for name in ("comm", "cluster") for metric, meta in doc[name]["metrics"].items()}
    seen = set()
    for row in table[1:]:
        name, metric = titles[row[0]]
        seen.add(name)
        for match, cell in zip(columns, row[1:]):
            assert match
            ratios = _pairs(doc[name], match[1], match[2], metric)
            # clear of 1.0 as printed, to two decimals
            clear = len(ratios) >= 3 and (min(ratios) > 1.005 or max(ratios) < 0.995)
            if (m := RATIO.match(cell)) is not None:
                assert clear, (row[0], cell, ratios)
                assert (float(m[2]), float(m[3]), int(m[4])) == (
                    round(min(ratios), 2), round(max(ratios), 2), len(ratios)), cell
            else:
                m = NOISE.match(cell)
                assert m is not None, f"{row[0]}: {cell!r} is neither a ratio nor noise"
                assert not clear and int(m[1]) == len(ratios), (row[0], cell, ratios)
    assert seen == {"comm", "cluster"}

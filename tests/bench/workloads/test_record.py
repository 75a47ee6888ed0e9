"""The README's headline and bench/results/README.md carry the workloads record's
table as the saved run renders it, cell for cell."""

from __future__ import annotations

from pathlib import Path

from bench.common.results import load
from bench.report import ratios

ROOT = Path(__file__).resolve().parents[3]
RECORD = ROOT / "bench" / "results" / "workloads" / "results.json"


def _holds(text: str, block: list[str]) -> bool:
    lines = text.splitlines()
    return any(lines[i:i + len(block)] == block for i in range(len(lines)))


def test_the_readmes_carry_the_workloads_record() -> None:
    doc = load(RECORD)
    sec = doc["workloads"]
    assert sec["reps_done"] >= 3 and not sec["truncated"]
    assert {c["loop"] for c in sec["configs"]} == {"asyncio", "uvloop"}
    assert {c["scheme"] for c in sec["configs"]} == {"tcp", "asyncio", "tls", "asyncio+tls"}
    want = [line for line in ratios.headline(doc).splitlines() if line.startswith("|")]
    assert len(want) == 2 + len(sec["catalog"])
    readme = (ROOT / "README.md").read_text()
    headline = readme.split("<!-- bench-headline -->", 1)[1].split("<!-- /bench-headline -->")[0]
    record = (ROOT / "bench" / "results" / "README.md").read_text()
    assert _holds(headline, want)
    assert _holds(record, want)

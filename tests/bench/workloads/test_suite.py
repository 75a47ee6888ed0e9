"""End to end at a small size: every workload on both comms, right and the same."""

from __future__ import annotations

import json
from pathlib import Path

from bench import cli
from bench.common.results import load
from bench.report import ratios
from bench.workloads import catalog


def test_every_workload_on_both_comms(tmp_path: Path) -> None:
    """One pair of every workload, plain, on uvloop: each run's answer is right and
    the same on both comms, the comm and loop are the ones asked for, and the
    report has a ratio row per workload and statistic."""
    rc = cli.main(["workloads", "--scale", "0.01", "--pairs", "1", "--loops", "uvloop",
                   "--security", "plain", "--quiet", "--no-plots", "--out", str(tmp_path)])
    assert rc == 0
    sec = load(tmp_path)["workloads"]
    names = [w.name for w in catalog.all_workloads()]
    assert sec["errors"] == []
    assert {n: c["right"] for n, c in sec["checks"].items()} == {n: 2 for n in names}
    assert {n: c["same"] for n, c in sec["checks"].items()} == {n: 2 for n in names}
    for run in sec["runs"]:
        ev = run["evidence"]
        assert ev["scheduler"] == "uvloop.Loop" and ev["workers"] == ["uvloop.Loop"]
        ours = run["scheme"] == "asyncio"
        assert ev["client_comm"].startswith("asynciocomm." if ours else "distributed.comm.tcp")
    head = ratios.headline(load(tmp_path))
    for name in names:
        assert f"| {name}: wall time, s | no measurable difference (1 pair) |" in head
    assert "| stealing_straggler | " in (tmp_path / "report.md").read_text()
    json.dumps(sec)

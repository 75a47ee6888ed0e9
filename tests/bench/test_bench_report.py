"""Paired ratios, markdown rendering and PNG plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import plots, report
from bench.stats import percentile, summarize


def test_ratios_are_paired_within_repetitions() -> None:
    metrics = {"m": {"higher_is_better": True}}
    # rep 0: B is 2x A; rep 1: B is 2x A; but the medians' ratio is not 2
    samples = [
        {"rep": 0, "config": "A", "metric": "m", "value": 1.0},
        {"rep": 1, "config": "A", "metric": "m", "value": 100.0},
        {"rep": 2, "config": "A", "metric": "m", "value": 10.0},
        {"rep": 0, "config": "B", "metric": "m", "value": 2.0},
        {"rep": 1, "config": "B", "metric": "m", "value": 200.0},
        {"rep": 2, "config": "B", "metric": "m", "value": 5.0},
    ]
    s = summarize(samples, metrics, "A", {"B": "A"})
    assert s["A"]["m"]["median"] == 10.0
    assert s["B"]["m"]["median"] == 5.0
    assert s["B"]["m"]["ratio_ref"] == pytest.approx(2.0)
    assert s["B"]["m"]["ratio_same_loop"] == pytest.approx(2.0)
    assert s["A"]["m"]["ratio_ref"] == 1.0


def test_lower_is_better_ratio_is_a_speedup() -> None:
    metrics = {"lat": {"higher_is_better": False}}
    samples = [{"rep": 0, "config": "A", "metric": "lat", "value": 100.0},
               {"rep": 0, "config": "B", "metric": "lat", "value": 25.0}]
    assert summarize(samples, metrics, "A", {})["B"]["lat"]["ratio_ref"] == 4.0


def test_count_metrics_get_medians_without_ratios() -> None:
    """Page faults can be zero for one side: no ratio is shown for them, only
    the medians (a 0.10 against 0.00 is not a 20x)."""
    metrics = {"faults": {"higher_is_better": False, "ratio": False}}
    samples = [{"rep": 0, "config": "A", "metric": "faults", "value": 0.5},
               {"rep": 0, "config": "B", "metric": "faults", "value": 320.0}]
    s = summarize(samples, metrics, "A", {"B": "A"})
    assert s["B"]["faults"]["median"] == 320.0
    assert s["A"]["faults"]["ratio_ref"] is None
    assert s["B"]["faults"]["ratio_ref"] is None and s["B"]["faults"]["ratio_same_loop"] is None


def test_percentile() -> None:
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile(list(range(101)), 99) == 99
    assert percentile([1.0, 2.0], 50) == 1.5


def test_fmt() -> None:
    assert report.fmt(12345.6) == "12,346"
    assert report.fmt(123.4) == "123"
    assert report.fmt(12.34) == "12.3"
    assert report.fmt(1.234) == "1.23"
    assert report.fmt(None) == "–"


def test_render_markdown(tiny_doc: dict[str, Any]) -> None:
    md = report.render(tiny_doc, {"comm": ["comm_m.png"]})
    assert md.startswith("# asynciocomm-bench results")
    assert "| metric | tcp@asyncio | asyncio@uvloop |" in md
    # medians 150 and 350, paired ratios 3.0 and 2.0 -> median 2.5
    assert "| a metric, op/s | 150 | 350 (2.50×) |" in md
    # cluster: lower is better, 10 -> 5 is a 2x speed-up
    assert "| 10.0 | 5.00 (2.00×) |" in md
    assert "asynciocomm-bench comm --size smoke" in md
    assert "![comm_m.png](comm_m.png)" in md
    assert "| transitions | 50.0 % |" in md
    assert "1.10× wall" in md


def test_plots_are_pngs(tiny_doc: dict[str, Any], tmp_path: Path) -> None:
    written = plots.render_all(tiny_doc, tmp_path)
    assert written["comm"] == ["comm_m.png"]
    assert written["cluster"] == ["cluster_m.png"]
    assert written["profile"] == ["profile_shares.png"]
    for name in written["comm"] + written["cluster"] + written["profile"]:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_report_subcommand_rerenders(tiny_doc: dict[str, Any], tmp_path: Path) -> None:
    from bench import cli
    from bench.results import save

    save(tiny_doc, tmp_path / "run")
    out = tmp_path / "rendered"
    rc = cli.main(["report", str(tmp_path / "run" / "results.json"), "--out", str(out),
                   "--name", "README.md"])
    assert rc == 0
    md = (out / "README.md").read_text()
    assert "| a metric, op/s | 150 | 350 (2.50×) |" in md
    assert (out / "comm_m.png").exists()

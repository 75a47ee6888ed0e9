"""The scale section's tables: a workload no worker count ran gets no table."""

from __future__ import annotations

from typing import Any

from asynciocomm_bench.scale import markdown as scale_markdown
from asynciocomm_bench.scale.metrics import metric_name


def _sec(workloads_at: dict[str, list[int]]) -> dict[str, Any]:
    configs = ["tcp@uvloop", "asyncio@uvloop"]
    metrics: dict[str, Any] = {}
    samples = []
    for wl, ws in workloads_at.items():
        for w in ws:
            m = metric_name(wl, w, "sched_cpu_us")
            metrics[m] = {"higher_is_better": False, "ratio": True}
            samples += [{"rep": r, "config": c, "metric": m, "value": 100.0 + r}
                        for c in configs for r in range(3)]
    return {"configs": [{"label": c, "scheme": c.split("@")[0], "loop": "uvloop"}
                        for c in configs],
            "workers": [64, 256], "metrics": metrics, "samples": samples}


def test_a_workload_that_ran_has_its_table() -> None:
    table = scale_markdown.cost_table(_sec({"map": [64, 256]}), "map", "sched_cpu_us")
    rows = [line for line in table.splitlines() if line.startswith("| ") and "workers" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["64", "256"]


def test_a_workload_that_did_not_run_has_no_table() -> None:
    sec = _sec({"map": [64, 256], "wide": [64]})
    assert scale_markdown.cost_table(sec, "tree", "sched_cpu_us") == ""
    assert "| 64 |" in scale_markdown.cost_table(sec, "wide", "sched_cpu_us")

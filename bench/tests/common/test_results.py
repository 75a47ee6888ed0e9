"""The JSON result document: schema validation, save and load."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from asynciocomm_bench import SCHEMA
from asynciocomm_bench.common.options import BenchError
from asynciocomm_bench.common.results import load, save, validate


def test_valid_document(tiny_doc: dict[str, Any]) -> None:
    assert tiny_doc["schema"] == SCHEMA == "asynciocomm-bench/1"
    assert validate(tiny_doc) == []
    env = tiny_doc["environment"]
    assert env["cpu_count"] >= 1
    assert "distributed" in env["versions"]


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d.update(schema="asynciocomm-bench/0"), "schema"),
    (lambda d: d.pop("environment"), "environment"),
    (lambda d: [d.pop(k) for k in ("comm", "cluster", "profile")], "no comm"),
    (lambda d: d["comm"]["samples"].append(
        {"rep": 0, "config": "nope", "metric": "ping_rts", "value": 1.0}), "unknown"),
    (lambda d: d["comm"]["samples"].append(
        {"rep": 0, "config": "tcp@uvloop", "metric": "zz", "value": 1.0}), "unknown"),
    (lambda d: d["comm"]["samples"][0].update(value="fast"), "not a number"),
    (lambda d: d["profile"]["runs"][0]["shares"].update(idle=0.9), "sum to 1"),
])
def test_invalid_documents(tiny_doc: dict[str, Any], mutate: Any, fragment: str) -> None:
    mutate(tiny_doc)
    errs = validate(tiny_doc)
    assert errs and any(fragment in e for e in errs), errs


def test_save_load_roundtrip_replaces_nan(tiny_doc: dict[str, Any], tmp_path: Path) -> None:
    tiny_doc["comm"]["summary"]["tcp@uvloop"]["ping_rts"]["median"] = math.nan
    path = save(tiny_doc, tmp_path)
    text = path.read_text()
    assert "NaN" not in text
    back = load(tmp_path)  # a directory works too
    assert back["comm"]["summary"]["tcp@uvloop"]["ping_rts"]["median"] is None
    assert back["comm"]["samples"] == tiny_doc["comm"]["samples"]


def test_load_invalid_is_bench_error(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(json.dumps({"schema": "other"}))
    with pytest.raises(BenchError, match="not a valid"):
        load(tmp_path / "results.json")


def _two_runs(tiny_doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    first = json.loads(json.dumps(tiny_doc))
    second = json.loads(json.dumps(tiny_doc))
    second["command"] = "asynciocomm-bench comm --reps 1"
    second.pop("cluster")
    for s in second["comm"]["samples"]:
        s["value"] *= 2.0
    return first, second


def test_merge_keeps_each_runs_repetitions_apart(tiny_doc: dict[str, Any]) -> None:
    from asynciocomm_bench.common.results import merge

    first, second = _two_runs(tiny_doc)
    merged = merge([first, second])
    assert validate(merged) == []
    comm = merged["comm"]
    n = len(first["comm"]["samples"])
    assert len(comm["samples"]) == n + len(second["comm"]["samples"])
    reps_first = {s["rep"] for s in comm["samples"][:n]}
    reps_second = {s["rep"] for s in comm["samples"][n:]}
    assert reps_first.isdisjoint(reps_second)
    # each config ran 3 times in each of the two runs of the same command
    assert comm["reps_done"] == 2 * len({s["rep"] for s in first["comm"]["samples"]})
    assert merged["cluster"] == first["cluster"]  # one run only: taken whole
    assert [m["command"] for m in merged["merged_from"]] == [first["command"],
                                                            second["command"]]
    # every value doubled in the second run: its medians move, the paired
    # ratios of a config against its stock peer do not
    checked = 0
    for lab, metrics in first["comm"]["summary"].items():
        for metric, cell in metrics.items():
            if cell.get("ratio_same_loop") is not None:
                checked += 1
                assert comm["summary"][lab][metric]["same_loop_pairs"] == 2 * cell[
                    "same_loop_pairs"]
                assert comm["summary"][lab][metric]["ratio_same_loop"] == pytest.approx(
                    cell["ratio_same_loop"])
    assert checked


def test_report_of_several_runs(tiny_doc: dict[str, Any], tmp_path: Path) -> None:
    from asynciocomm_bench import cli

    first, second = _two_runs(tiny_doc)
    a, b = save(first, tmp_path / "a"), save(second, tmp_path / "b")
    cli.main(["report", str(a), str(b), "--out", str(tmp_path / "out"), "--no-plots"])
    text = (tmp_path / "out" / "report.md").read_text()
    assert text.count("- merged run:") == 2
    assert "comm --reps 1" in text
    saved = load(tmp_path / "out")
    assert len(saved["comm"]["samples"]) == 2 * len(first["comm"]["samples"])
    with pytest.raises(BenchError, match="must not hold"):
        cli.run(cli.build_parser().parse_args(
            ["report", str(a), str(b), "--out", str(tmp_path / "a"), "--no-plots"]))

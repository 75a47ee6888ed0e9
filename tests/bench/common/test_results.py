"""The JSON result document: schema validation, save and load."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench import SCHEMA
from bench.common.options import BenchError
from bench.common.results import load, save, validate


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

"""Medians, percentiles and ratios paired within a repetition."""

from __future__ import annotations

import pytest

from bench.common.stats import percentile, summarize


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

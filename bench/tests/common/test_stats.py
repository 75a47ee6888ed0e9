"""Medians, percentiles and ratios paired within a repetition."""

from __future__ import annotations

import pytest

from asynciocomm_bench.common.stats import Comparison, percentile, summarize


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


@pytest.mark.parametrize("ratios, measurable", [
    ((2.0, 2.1, 1.9), True),
    ((0.8, 0.85, 0.9), True),       # a measurable slow-down
    ((2.0, 2.1), False),            # fewer than 3 pairs
    ((0.9, 1.2, 1.1), False),       # the range crosses 1.0
    ((1.0, 1.1, 1.2), False),       # and reaches it
    ((0.92, 0.98, 0.998), False),   # as printed: 0.92-1.00
    ((1.01, 1.1, 1.2), True),
])
def test_a_comparison_is_measurable_with_three_pairs_clear_of_one(
        ratios: tuple[float, ...], measurable: bool) -> None:
    c = Comparison(ratios)
    assert c.measurable is measurable
    assert (c.lo, c.hi, c.n) == (min(ratios), max(ratios), len(ratios))


def test_summary_keeps_the_same_loop_range_and_pairs() -> None:
    metrics = {"m": {"higher_is_better": True}}
    samples = [{"rep": r, "config": c, "metric": "m", "value": v}
               for c, vals in (("A", [1.0, 2.0, 4.0]), ("B", [3.0, 4.0, 4.0]))
               for r, v in enumerate(vals)]
    entry = summarize(samples, metrics, "A", {"B": "A"})["B"]["m"]
    assert entry["ratio_same_loop"] == 2.0
    assert entry["same_loop_range"] == [1.0, 3.0] and entry["same_loop_pairs"] == 3

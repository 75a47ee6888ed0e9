"""Paired ratios against stock on the same loop, and noise worded as noise."""

from __future__ import annotations

from typing import Any

from bench.scale import summary


def _sec(values: dict[str, list[float]]) -> dict[str, Any]:
    return {"samples": [{"rep": r, "config": c, "metric": "m", "value": v}
                        for c, vs in values.items() for r, v in enumerate(vs)],
            "same_loop_refs": {"tcp@uvloop": "tcp@uvloop", "asyncio@uvloop": "tcp@uvloop"}}


def test_pairs_within_a_repetition() -> None:
    sec = _sec({"tcp@uvloop": [100, 200, 400], "asyncio@uvloop": [80, 160, 280]})
    r = summary.ratio(sec, "asyncio@uvloop", "m")
    assert (r["lo"], r["median"], r["hi"], r["n"]) == (0.7, 0.8, 0.8, 3)
    assert r["measurable"]
    assert summary.ratio(sec, "tcp@uvloop", "m") is None
    s = summary.ratio(sec, "asyncio@uvloop", "m", speedup=True)
    assert s["median"] == 1.25
    assert summary.fmt_ratio(r) == "0.80× (0.70-0.80×, 3 pairs)"


def test_a_ratio_across_one_is_noise() -> None:
    sec = _sec({"tcp@uvloop": [100, 100, 100], "asyncio@uvloop": [90, 105, 95]})
    r = summary.ratio(sec, "asyncio@uvloop", "m")
    assert not r["measurable"]
    assert summary.fmt_ratio(r).startswith("no measurable difference (3 pairs")


def test_fewer_than_three_pairs_is_noise() -> None:
    sec = _sec({"tcp@uvloop": [100, 100], "asyncio@uvloop": [50, 50]})
    assert summary.fmt_ratio(summary.ratio(sec, "asyncio@uvloop", "m")).startswith(
        "no measurable difference (2 pairs")


def test_values_spread() -> None:
    sec = _sec({"tcp@uvloop": [300, 100, 200]})
    assert summary.fmt_value(summary.values(sec, "tcp@uvloop", "m"), "µs") == \
        "200 µs (100-300)"

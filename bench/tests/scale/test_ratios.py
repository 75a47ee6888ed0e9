"""The scale section's ratios: paired against stock on the same loop, noise as noise."""

from __future__ import annotations

from typing import Any

from asynciocomm_bench.scale import ratios as sr


def _sec(values: dict[str, list[float]], higher: bool = False) -> dict[str, Any]:
    return {"samples": [{"rep": r, "config": c, "metric": "m", "value": v}
                        for c, vs in values.items() for r, v in enumerate(vs)],
            "configs": [{"label": c, "scheme": c.split("@")[0], "loop": c.split("@")[1]}
                        for c in values],
            "metrics": {"m": {"higher_is_better": higher, "ratio": True}}}


def test_pairs_within_a_repetition_against_the_same_loop() -> None:
    sec = _sec({"tcp@uvloop": [100, 200, 400], "asyncio@uvloop": [80, 160, 280],
                "tcp@asyncio": [1, 1, 1]})
    c = sr.comparison(sec, "asyncio@uvloop", "m")
    assert c is not None and c.ratios == (1.25, 1.25, 400 / 280)
    assert sr.cost(c) == "0.80× (0.70–0.80×, 3 pairs)"
    assert sr.speedup(c).startswith("1.25× (1.25–1.43×, 3 pairs)")
    assert sr.comparison(sec, "tcp@uvloop", "m") is None


def test_tls_is_paired_with_tls() -> None:
    sec = _sec({"tls@asyncio": [100] * 3, "tcp@asyncio": [50] * 3,
                "asyncio+tls@asyncio": [50] * 3})
    assert sr.peer(sec, "asyncio+tls@asyncio") == "tls@asyncio"
    assert sr.comparison(sec, "asyncio+tls@asyncio", "m").median == 2.0


def test_noise_is_worded_as_noise() -> None:
    across = _sec({"tcp@uvloop": [100] * 3, "asyncio@uvloop": [90, 105, 95]})
    assert sr.cost(sr.comparison(across, "asyncio@uvloop", "m")).startswith(
        "no measurable difference (3 pairs")
    two = _sec({"tcp@uvloop": [100] * 2, "asyncio@uvloop": [50] * 2})
    assert sr.cost(sr.comparison(two, "asyncio@uvloop", "m")).startswith(
        "no measurable difference (2 pairs")


def test_values_spread() -> None:
    sec = _sec({"tcp@uvloop": [300, 100, 200]})
    assert sr.fmt_value(sr.values(sec, "tcp@uvloop", "m"), "µs") == "200 µs (100-300)"

"""Medians, ranges and paired ratios against stock of the ``scale`` section.

A ratio pairs each asynciocomm configuration with the stock comm on the same
loop (``asyncio@uvloop`` with ``tcp@uvloop``, ``asyncio+tls@asyncio`` with
``tls@asyncio``) within one repetition; its median and range are over the
repetitions. Costs (CPU per task, wall time) are given as ours / stock, so
0.75× is 25 % less; throughput as ours / stock, so > 1 is faster.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

#: A ratio rests on at least this many pairs before it is called a difference.
MIN_PAIRS = 3


def _by(section: dict[str, Any]) -> dict[tuple[str, str], dict[int, float]]:
    by: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for row in section["samples"]:
        v = row["value"]
        if v is not None and math.isfinite(v):
            by[(row["config"], row["metric"])][row["rep"]] = v
    return by


def spread(values: list[float]) -> dict[str, Any] | None:
    """Median, min, max and count, or None without values."""
    if not values:
        return None
    return {"median": statistics.median(values), "lo": min(values), "hi": max(values),
            "n": len(values)}


def values(section: dict[str, Any], config: str, metric: str) -> dict[str, Any] | None:
    """The spread of one configuration's metric over the repetitions."""
    return spread(list(_by(section).get((config, metric), {}).values()))


def ratio(section: dict[str, Any], config: str, metric: str,
          speedup: bool = False) -> dict[str, Any] | None:
    """ours / stock on the same loop, paired per repetition (None for stock);
    stock / ours with ``speedup`` (for a wall time: > 1 is faster)."""
    ref = section["same_loop_refs"].get(config)
    if not ref or ref == config:
        return None
    by = _by(section)
    mine, theirs = by.get((config, metric), {}), by.get((ref, metric), {})
    pairs = [(theirs[r] / mine[r]) if speedup else (mine[r] / theirs[r])
             for r in mine if r in theirs and theirs[r] > 0 and mine[r] > 0]
    out = spread(pairs)
    if out is not None:
        out["stock"] = ref
        out["crosses_1"] = out["lo"] <= 1.0 <= out["hi"]
        out["measurable"] = out["n"] >= MIN_PAIRS and not out["crosses_1"]
    return out


def fmt_ratio(r: dict[str, Any] | None, digits: int = 2) -> str:
    """``0.82× (0.79-0.85×, 3 pairs)``; noise is worded as noise."""
    if r is None:
        return "–"
    pairs = f"{r['n']} pair{'s' if r['n'] != 1 else ''}"
    if not r["measurable"]:
        return (f"no measurable difference ({pairs}: "
                f"{r['lo']:.{digits}f}-{r['hi']:.{digits}f}×)")
    return f"{r['median']:.{digits}f}× ({r['lo']:.{digits}f}-{r['hi']:.{digits}f}×, {pairs})"


def fmt_value(v: dict[str, Any] | None, unit: str = "") -> str:
    """``412 µs (398-440)``."""
    if v is None:
        return "–"
    def num(x: float) -> str:
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"
    u = f" {unit}" if unit else ""
    if v["n"] == 1:
        return f"{num(v['median'])}{u}"
    return f"{num(v['median'])}{u} ({num(v['lo'])}-{num(v['hi'])})"

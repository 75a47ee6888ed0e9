"""Medians and ratios paired within a repetition."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation."""
    if not values:
        return math.nan
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    if lo == hi:
        return float(s[lo])
    return float(s[lo] + (s[hi] - s[lo]) * (k - lo))


def median(values: Iterable[float]) -> float:
    """The median of the finite values, NaN when there are none."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return float(statistics.median(vals)) if vals else math.nan


def summarize(
    samples: list[dict[str, Any]],
    metrics: dict[str, dict[str, Any]],
    reference: str,
    same_loop_refs: dict[str, str],
) -> dict[str, dict[str, dict[str, Any]]]:
    """Medians per config and metric, with paired ratios.

    ``samples`` are rows ``{"rep", "config", "metric", "value"}``. The ratio
    is a *speed-up*: value/ref for higher-is-better metrics and ref/value
    otherwise, so > 1 always means better than the reference. It is the
    median over repetitions of the ratio within each repetition.
    ``same_loop_refs`` maps a config to its tcp-on-the-same-loop config.
    A metric whose metadata has ``"ratio": False`` (a count such as page faults,
    which can be zero) gets medians only.
    """
    by: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for row in samples:
        by[(row["config"], row["metric"])][row["rep"]] = row["value"]

    def ratio(cfg: str, ref: str, metric: str) -> float | None:
        if not metrics.get(metric, {}).get("ratio", True):
            return None
        if cfg == ref:
            return 1.0
        mine, theirs = by.get((cfg, metric), {}), by.get((ref, metric), {})
        higher = metrics.get(metric, {}).get("higher_is_better", True)
        rs = []
        for rep, v in mine.items():
            r = theirs.get(rep)
            if v is None or r is None or not (math.isfinite(v) and math.isfinite(r)):
                continue
            if v <= 0 or r <= 0:
                continue
            rs.append(v / r if higher else r / v)
        return median(rs) if rs else None

    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (cfg, metric), reps in sorted(by.items()):
        vals = list(reps.values())
        med = median(vals)
        entry: dict[str, Any] = {
            "median": None if math.isnan(med) else med,
            "n": len([v for v in vals if v is not None and math.isfinite(v)]),
            "ratio_ref": ratio(cfg, reference, metric),
        }
        loop_ref = same_loop_refs.get(cfg)
        if loop_ref and loop_ref != cfg:
            entry["ratio_same_loop"] = ratio(cfg, loop_ref, metric)
        out[cfg][metric] = entry
    return dict(out)

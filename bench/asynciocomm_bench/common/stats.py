"""Medians, and ratios paired within a repetition with their spread."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

#: A ratio over fewer pairs than this is no measurable difference, whatever its
#: value: with two repetitions the median is their mean, and one slow repetition
#: of either side (common on this shared 2-core machine) sets it.
MIN_PAIRS = 3
#: Ranges are shown to two decimals: a bound within this of 1.0 reads 1.00, and
#: a range that reads as reaching 1.0 is no measurable difference either.
MARGIN = 0.005


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


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One configuration against a reference: the speed-up of each repetition in
    which both were measured (> 1 is better, for throughputs and costs alike)."""

    ratios: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.ratios)

    @property
    def median(self) -> float:
        return median(self.ratios)

    @property
    def lo(self) -> float:
        return min(self.ratios) if self.ratios else math.nan

    @property
    def hi(self) -> float:
        return max(self.ratios) if self.ratios else math.nan

    @property
    def measurable(self) -> bool:
        """At least MIN_PAIRS pairs, and their range clear of 1.0 (by MARGIN)."""
        return self.n >= MIN_PAIRS and (self.lo > 1.0 + MARGIN or self.hi < 1.0 - MARGIN)


Values = dict[tuple[str, str], dict[int, float]]


def by_config(samples: Iterable[dict[str, Any]]) -> Values:
    """The samples as {(config, metric): {rep: value}}."""
    by: Values = defaultdict(dict)
    for row in samples:
        by[(row["config"], row["metric"])][row["rep"]] = row["value"]
    return by


def compare(by: Values, cfg: str, ref: str, metric: str, higher: bool = True) -> Comparison:
    """``cfg`` against ``ref`` on ``metric``, paired within each repetition."""
    mine, theirs = by.get((cfg, metric), {}), by.get((ref, metric), {})
    out = []
    for rep, v in sorted(mine.items()):
        r = theirs.get(rep)
        if v is None or r is None or not (math.isfinite(v) and math.isfinite(r)):
            continue
        if v <= 0 or r <= 0:
            continue
        out.append(v / r if higher else r / v)
    return Comparison(tuple(out))


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
    ``same_loop_refs`` maps a config to the stock comm on its loop; against
    that one the range of the paired ratios and their number are kept too.
    A metric whose metadata has ``"ratio": False`` (a count such as page faults,
    which can be zero) gets medians only.
    """
    by = by_config(samples)

    def against(cfg: str, ref: str, metric: str) -> Comparison | None:
        meta = metrics.get(metric, {})
        if not meta.get("ratio", True):
            return None
        return compare(by, cfg, ref, metric, meta.get("higher_is_better", True))

    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (cfg, metric), reps in sorted(by.items()):
        vals = list(reps.values())
        med = median(vals)
        to_ref = against(cfg, reference, metric)
        entry: dict[str, Any] = {
            "median": None if math.isnan(med) else med,
            "n": len([v for v in vals if v is not None and math.isfinite(v)]),
            "ratio_ref": None if to_ref is None else (
                1.0 if cfg == reference else to_ref.median if to_ref.n else None),
        }
        loop_ref = same_loop_refs.get(cfg)
        if loop_ref and loop_ref != cfg:
            c = against(cfg, loop_ref, metric)
            entry["ratio_same_loop"] = c.median if c is not None and c.n else None
            if c is not None and c.n:
                entry["same_loop_range"] = [c.lo, c.hi]
                entry["same_loop_pairs"] = c.n
        out[cfg][metric] = entry
    return dict(out)


#: The wording of a comparison whose range reaches 1.0 or that has too few pairs.
NOISE = "no measurable difference"


def cell(c: Comparison | None) -> str:
    """A comparison as a table cell: ratio with its range, or the noise wording."""
    if c is None or not c.n:
        return "–"
    if not c.measurable:
        return f"{NOISE} ({c.n} pair{'s' if c.n != 1 else ''})"
    return f"{c.median:.2f}× ({c.lo:.2f}–{c.hi:.2f}×, {c.n} pairs)"

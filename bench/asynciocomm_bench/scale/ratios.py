"""The ``scale`` section's medians, ranges and ratios against stock.

A ratio pairs each configuration with the stock comm on the same loop
(``asyncio@uvloop`` with ``tcp@uvloop``, ``asyncio+tls@asyncio`` with
``tls@asyncio``; ``options.stock_scheme``) within one repetition, as
``stats.compare`` does for every section: a speed-up, > 1 is better for costs
and throughputs alike, worded as noise by ``stats.cell`` when its range
reaches 1.0 or it rests on fewer than ``stats.MIN_PAIRS`` pairs. The targets
are stated as costs (ours / stock: 0.75× is 25 % less), so ``cost`` gives the
same comparison inverted.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from asynciocomm_bench.common.options import stock_scheme
from asynciocomm_bench.common.stats import NOISE, Comparison, by_config, cell, compare


def values(sec: dict[str, Any], config: str, metric: str) -> dict[str, Any] | None:
    """Median, min, max and count of one configuration's metric, or None."""
    vals = [v for v in by_config(sec["samples"]).get((config, metric), {}).values()
            if v is not None and math.isfinite(v)]
    if not vals:
        return None
    return {"median": statistics.median(vals), "lo": min(vals), "hi": max(vals),
            "n": len(vals)}


def peer(sec: dict[str, Any], config: str) -> str | None:
    """The stock configuration on the same loop, or None for a stock one."""
    for c in sec["configs"]:
        if c["label"] == config:
            stock = stock_scheme(c["scheme"])
            return None if stock == c["scheme"] else f"{stock}@{c['loop']}"
    return None


def comparison(sec: dict[str, Any], config: str, metric: str) -> Comparison | None:
    """``config`` against its stock peer (speed-up form), or None."""
    ref = peer(sec, config)
    meta = sec["metrics"].get(metric, {})
    if ref is None or not meta.get("ratio", True):
        return None
    return compare(by_config(sec["samples"]), config, ref, metric,
                   meta.get("higher_is_better", True))


def speedup(c: Comparison | None) -> str:
    """The headline's cell: ``1.22× (1.18–1.30×, 3 pairs)`` or the noise wording."""
    return cell(c)


def cost(c: Comparison | None) -> str:
    """The same comparison as ours / stock: ``0.82× (0.77–0.85×, 3 pairs)``."""
    if c is None or not c.n:
        return "–"
    if not c.measurable:
        return f"{NOISE} ({c.n} pair{'s' if c.n != 1 else ''}: " \
               f"{1 / c.hi:.2f}–{1 / c.lo:.2f}×)"
    return f"{1 / c.median:.2f}× ({1 / c.hi:.2f}–{1 / c.lo:.2f}×, {c.n} pairs)"


def fmt_value(v: dict[str, Any] | None, unit: str = "") -> str:
    """``412 µs (398-440)``, the range over the repetitions."""
    if v is None:
        return "–"

    def num(x: float) -> str:
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"
    u = f" {unit}" if unit else ""
    if v["n"] == 1:
        return f"{num(v['median'])}{u}"
    return f"{num(v['median'])}{u} ({num(v['lo'])}-{num(v['hi'])})"

"""The ``gc`` section as markdown and PNG plots."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.stats import MARGIN, MIN_PAIRS, by_config, median
from asynciocomm_bench.report.markdown import fmt, section_table
from asynciocomm_bench.report.plots import section_plots

NOISE = "no measurable difference"


def paired(sec: dict[str, Any], cfg: str, ref: str, metric: str) -> list[float]:
    """``cfg``'s value over ``ref``'s, per repetition in which both were measured
    (a plain fraction, not a speed-up: below 1 means less)."""
    by = by_config(sec["samples"])
    mine, theirs = by.get((cfg, metric), {}), by.get((ref, metric), {})
    out = []
    for rep, v in sorted(mine.items()):
        r = theirs.get(rep)
        if r is None or v is None or not (math.isfinite(v) and math.isfinite(r)):
            continue
        if r > 0:
            out.append(v / r)
        elif v == 0:
            out.append(1.0)
    return out


def fraction_cell(values: list[float], percent: bool = False) -> str:
    """Median fraction with its range and pair count; the noise wording where
    the range reaches 1.0 (as printed, to MARGIN) or there are fewer than
    MIN_PAIRS pairs."""
    if not values:
        return "–"
    med, lo, hi = median(values), min(values), max(values)
    n = len(values)
    if percent:
        text = f"{100 * med:.1f} % ({100 * lo:.1f}–{100 * hi:.1f} %, {n} pairs)"
    else:
        text = f"{med:.2f}× ({lo:.2f}–{hi:.2f}×, {n} pairs)"
    if n < MIN_PAIRS or (lo <= 1.0 + MARGIN and hi >= 1.0 - MARGIN):
        return f"{NOISE}: {text}"
    return text


def _comparison_table(sec: dict[str, Any], pairs: list[tuple[str, str]],
                      rows: list[tuple[str, str, bool]]) -> str:
    if not pairs:
        return ""
    heads = [f"`{a}` / `{b}`" for a, b in pairs]
    lines = ["| measurement | " + " | ".join(heads) + " |", "|---|" + "---|" * len(pairs)]
    for metric, title, percent in rows:
        cells = [fraction_cell(paired(sec, a, b, metric), percent) for a, b in pairs]
        if all(c == "–" for c in cells):
            continue
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _kinds(sec: dict[str, Any]) -> str:
    lines = ["| config | cycles made by (creator) | cycles per 1,000 tasks | objects "
             "per 1,000 tasks | objects per cycle: types |", "|---|---|---|---|---|"]
    for lab, runs in sec.get("details", {}).items():
        last = runs[-1]
        per = 1000.0 / last["tasks"]
        if not last["kinds"]:
            lines.append(f"| `{lab}` | (no cyclic garbage) | 0 | 0 | |")
        for k in last["kinds"][:4]:
            types = ", ".join(f"{t} {n:g}" for t, n in k["types"].items())
            lines.append(f"| `{lab}` | `{k['creator']}` | {fmt(k['cycles'] * per)} | "
                         f"{fmt(k['objects'] * per)} | {types} |")
    return "\n".join(lines)


DRAFT_ROWS = [("cyclic_objects", "cyclic objects, with the draft / without", True),
              ("gc_cpu_ms", "GC CPU per task, with the draft / without", False),
              ("gen2", "full collections, with the draft / without", False),
              ("sched_cpu_ms", "scheduler CPU per task, with the draft / without", False)]
STOCK_ROWS = [("cyclic_objects", "cyclic objects per task", False),
              ("timeouts_per_batch", "BatchedSend timeouts per batch", False),
              ("batches", "batches per task", False),
              ("gc_cpu_ms", "GC CPU per task", False)]


def _comparisons(sec: dict[str, Any], prefix: str, where: str) -> list[str]:
    """The draft and the stock tables of the metrics named ``prefix + name``."""
    out: list[str] = []
    drafts = list((sec.get("draft_refs") or {}).items())
    table = _comparison_table(sec, drafts, [(prefix + m, t, p) for m, t, p in DRAFT_ROWS])
    if table:
        out += [f"{where}: the draft against the same comm and loop without it (paired, "
                "per repetition; below 1 is less):", "", table, ""]
    labels = {c["label"] for c in sec["configs"]}
    stock = [(lab, ref) for lab, ref in sec["same_loop_refs"].items()
             if lab != ref and ref in labels]
    table = _comparison_table(sec, stock, [(prefix + m, t, p) for m, t, p in STOCK_ROWS])
    if table:
        out += [f"{where}: asynciocomm against the stock comm on the same loop (paired; "
                "below 1 is less):", "", table, ""]
    return out


def render(sec: dict[str, Any], plots: list[str] | None = None) -> str:
    """The markdown of a ``gc`` section."""
    b = sec.get("bounds") or {}
    where = (f"{b.get('workers')} workers x {b.get('threads')} threads on this host, a map "
             f"of {b.get('tasks'):,} tasks" if b else "")
    scale = sec.get("scale_workers") or []
    if scale:
        where += ("; " if where else "") + (
            f"{', '.join(map(str, scale))} workers on {sec.get('scale_hosts')} worker hosts "
            f"({sec.get('network')}), a map of {sec.get('scale_tasks'):,} tasks")
    out = ["## The scheduler's garbage collector", "",
           f"In the scheduler's process, per 1,000 tasks ({where}; "
           f"{sec.get('reps_done')} repetitions, configurations interleaved). "
           "Timing figures come from a run with `gc.callbacks` only; the cyclic "
           "objects, their creators and the timeouts from a second run with "
           "`gc.DEBUG_SAVEALL` (every object the collector found unreachable, plus what "
           "was still pending at the end). `+0011` = every process of the cluster runs "
           "distributed built from its sdist with `patches/0011` applied.", "",
           "Medians:", "", section_table(sec), ""]
    if b:
        out += _comparisons(sec, "", f"{b.get('workers')} workers")
    for w in scale:
        out += _comparisons(sec, f"w{w}_", f"{w} workers")
    out += ["Who made the cyclic garbage (the last repetition's attribution run; an "
            "exception's creator is its traceback, outermost frame first):", "",
            _kinds(sec), ""]
    for e in sec.get("errors", []):
        at = f", {e['workers']} workers" if e.get("workers") else ""
        out.append(f"- error in `{e['config']}` (rep {e['rep']}{at}): {e['error'][:300]}")
    out += [f"![{p}]({p})" for p in plots or []]
    return "\n".join(out).rstrip() + "\n"


def plots(doc: dict[str, Any], outdir: Path) -> list[str]:
    """One bar chart per plotted metric of the ``gc`` section."""
    return section_plots(doc, "gc", outdir)

"""What the report says about a ``workloads`` section beyond its tables."""

from __future__ import annotations

from typing import Any

from asynciocomm_bench.common.options import is_tls
from asynciocomm_bench.common.stats import median


def details(sec: dict[str, Any]) -> str:
    """How the runs were made, each workload and its answer checks."""
    opts = sec.get("options", {})
    checks = sec.get("checks", {})
    lines = [
        f"Each run: a fresh `distributed.LocalCluster` of {opts.get('workers', '?')} worker "
        f"processes × {opts.get('threads', '?')} thread (its scheduler, nannies and the "
        "client in one process, on the event-loop thread distributed starts), a warm-up "
        "of the workload at a small size, then the timed workload. Wall time is the "
        "client's, graph construction included; the scheduler's CPU is that of its "
        "event-loop thread (`time.thread_time` run on it), which it shares with the "
        "nannies and the client's comm. The stock comm and asynciocomm run one after "
        "the other on the same loop, in ABBA order over the pairs; "
        f"{sec.get('reps_done', '?')} pair(s), scale {opts.get('scale', '?')}, "
        f"{sec.get('seconds', 0) / 60:.0f} min in all.",
        "",
        "| workload | what (at scale 1) | runs | right answer | same answer on both comms |",
        "|---|---|---|---|---|",
    ]
    for w in sec.get("catalog", []):
        c = checks.get(w["name"], {})
        runs = c.get("runs", 0)
        lines.append(f"| {w['name']} | {w['what']} | {runs} | {c.get('right', 0)}/{runs} "
                     f"| {c.get('same', 0)}/{runs} |")
    lines += ["", "Right answer: equal to a closed form, or to dask's local threaded "
              "scheduler on the same graph (by tasks where the run uses P2P), floats "
              "within 1e-6 relative; frames by their row count and the sum of their row "
              "hashes. Same answer: equal to the first run of that workload on that loop "
              "and security, whichever comm ran it."]
    return "\n".join(lines + order_effect(sec.get("runs") or [])
                     + _profiles(sec.get("profiles") or []))


def order_effects(runs: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per workload, the wall time of the first run of each pair over the second's,
    whichever comm ran first: what the machine adds to a run for coming first."""
    pairs: dict[tuple[str, str, bool, int], dict[bool, float]] = {}
    for r in runs:
        if "error" in r or "wall_s" not in r:
            continue
        key = (r["workload"], r["loop"], is_tls(r["scheme"]), r["pair"])
        pairs.setdefault(key, {})[bool(r["first"])] = r["wall_s"]
    out: dict[str, list[float]] = {}
    for (name, *_), sides in pairs.items():
        if True in sides and False in sides:
            out.setdefault(name, []).append(sides[True] / sides[False])
    return out


def order_effect(runs: list[dict[str, Any]]) -> list[str]:
    """The order effect per workload, beside which a comm's difference must show."""
    effects = order_effects(runs)
    if not effects:
        return []

    lines = ["", "Order effect: the first run of a pair against the second, whichever comm "
             "ran first (wall time, median and range over every pair, loop and security). "
             "The ABBA order lets the comms go first equally often only over an even "
             "number of pairs; where this effect is larger than a comm's difference, "
             "few pairs cannot tell them apart.", "",
             "| workload | first / second, median | range | pairs |", "|---|---|---|---|"]
    for name, ratios in effects.items():
        lines.append(f"| {name} | {median(ratios):.2f} | "
                     f"{min(ratios):.2f}–{max(ratios):.2f} | {len(ratios)} |")
    return lines


def _profiles(runs: list[dict[str, Any]]) -> list[str]:
    """The profiled runs: the scheduler loop's busy time per category."""
    if not runs:
        return []
    from asynciocomm_bench.profile.speedscope import CATEGORIES

    cats = [c for c in CATEGORIES if c != "idle"]
    lines = ["", "py-spy on the scheduler's event-loop thread (\"IO loop\") during one more "
             "run of each: share of its busy samples per category, and its idle share.", "",
             "| workload | comm | wall, s | samples | " + " | ".join(cats) + " | idle | file |",
             "|---|---|---|---|" + "---|" * (len(cats) + 2)]
    for r in runs:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['config']} | {r['error'][:80]} |")
            continue
        busy = [f"{100 * r['busy_shares'].get(c, 0.0):.0f} %" for c in cats]
        lines.append(f"| {r['workload']} | {r['config']} | {r['wall_s']:.2f} | {r['samples']} | "
                     + " | ".join(busy) + f" | {100 * r['shares']['idle']:.0f} % "
                     f"| `{r['speedscope']}` |")
    return lines

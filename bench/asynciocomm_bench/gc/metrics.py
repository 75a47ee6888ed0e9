"""The ``gc`` section's metrics: the probe's two runs, per 1,000 tasks."""

from __future__ import annotations

from typing import Any

#: name: (title, unit, higher is better, plotted)
METRICS: dict[str, tuple[str, str, bool, bool]] = {
    "cyclic_objects": ("cyclic objects per 1,000 tasks (attribution run)", "objects",
                       False, True),
    "batched_share": ("share of the cyclic objects made by BatchedSend", "%", False, False),
    "timeouts_per_batch": ("BatchedSend timeouts per batch sent (attribution run)", "",
                           False, True),
    "batches": ("batches the scheduler sent per 1,000 tasks", "", False, False),
    "msgs_per_batch": ("messages per batch the scheduler sent", "", True, False),
    "gc_cpu_ms": ("GC CPU per 1,000 tasks", "ms", False, True),
    "gc_share": ("GC share of the scheduler's CPU", "%", False, True),
    "sched_cpu_ms": ("scheduler process CPU per 1,000 tasks", "ms", False, False),
    "gen0": ("generation-0 collections per 1,000 tasks", "", False, False),
    "gen1": ("generation-1 collections per 1,000 tasks", "", False, False),
    "gen2": ("full collections per 1,000 tasks", "", False, True),
    "pause_max_ms": ("longest GC pause", "ms", False, False),
    "collected": ("objects the collector freed per 1,000 tasks (timing run)", "objects",
                  False, False),
}
#: Metrics that can be zero (with the draft): medians only, no ratio.
COUNTS = ("cyclic_objects", "batched_share", "timeouts_per_batch", "gen2", "collected",
          "msgs_per_batch")


def scaled(workers: int, name: str) -> str:
    """The metric name of ``name`` at ``workers`` workers (the scale runs)."""
    return f"w{workers}_{name}"


def metrics(workers: list[int] | None = None) -> dict[str, dict[str, Any]]:
    """Metric metadata in the result document's form: the local cluster's and,
    for each of ``workers``, the scale runs' (named by :func:`scaled`)."""
    out = {name: {"title": t, "unit": u, "higher_is_better": h, "plot": p,
                  **({"ratio": False} if name in COUNTS else {})}
           for name, (t, u, h, p) in METRICS.items()}
    for w in workers or []:
        out.update({scaled(w, name): {**meta, "title": f"{w} workers: {meta['title']}"}
                    for name, meta in list(out.items()) if not name.startswith("w")})
    return out


def batched_objects(kinds: list[dict[str, Any]]) -> int:
    """Objects in the cycles whose creator runs through distributed's BatchedSend."""
    return sum(k["objects"] for k in kinds if "distributed.batched." in k["creator"])


def values(timing: dict[str, Any], attrib: dict[str, Any], tasks: int) -> dict[str, float]:
    """The per-1,000-task values of one cluster's two measured runs."""
    per = 1000.0 / tasks
    out = {
        "gc_cpu_ms": timing["gc_cpu_s"] * 1000 * per,
        "gc_share": 100.0 * timing["gc_cpu_s"] / timing["process_cpu_s"]
        if timing["process_cpu_s"] > 0 else 0.0,
        "sched_cpu_ms": timing["process_cpu_s"] * 1000 * per,
        "pause_max_ms": timing["longest_s"] * 1000,
        "collected": timing["collected"] * per,
        **values_of_attribution(attrib, tasks),
    }
    for gen in range(3):
        out[f"gen{gen}"] = timing["collections"][gen] * per
    return out


def scale_values(timing: dict[str, Any], tasks: int) -> dict[str, float]:
    """The collector's figures that the scale bench keeps for its map workload."""
    return {"gc_cpu_us": timing["gc_cpu_s"] * 1e6 / tasks,
            "gc_full": timing["collections"][2] * 1000.0 / tasks,
            "gc_pause_ms": timing["longest_s"] * 1000,
            "gc_freed": timing["collected"] / tasks}


def from_scale(values: dict[str, float], attrib: dict[str, Any],
               tasks: int) -> dict[str, float]:
    """The gc metrics of a scale run: the map's values (per task, from the
    scale driver's timing probe) and one attribution run of ``tasks`` tasks."""
    out = {"gc_cpu_ms": values["gc_cpu_us"],  # µs per task = ms per 1,000 tasks
           "sched_cpu_ms": values["sched_cpu_us"],
           "gc_share": 100.0 * values["gc_cpu_us"] / values["sched_cpu_us"]
           if values["sched_cpu_us"] > 0 else 0.0,
           "gen2": values["gc_full"], "pause_max_ms": values["gc_pause_ms"],
           "collected": values["gc_freed"] * 1000}
    full = values_of_attribution(attrib, tasks)
    return {**out, **full}


def values_of_attribution(attrib: dict[str, Any], tasks: int) -> dict[str, float]:
    """The figures of an attribution run alone, per 1,000 tasks."""
    per = 1000.0 / tasks
    cyclic = attrib.get("cyclic_objects", 0)
    out = {"cyclic_objects": cyclic * per,
           "batched_share": 100.0 * batched_objects(attrib.get("kinds", [])) / cyclic
           if cyclic else 0.0,
           "batches": attrib["batches"] * per}
    if attrib["batches"]:
        out["msgs_per_batch"] = attrib["messages"] / attrib["batches"]
        out["timeouts_per_batch"] = (attrib.get("exceptions", {}).get("TimeoutError", 0)
                                     / attrib["batches"])
    return out


def details(attrib: dict[str, Any], tasks: int) -> dict[str, Any]:
    """What the attribution run found, kept beside the samples."""
    return {"tasks": tasks, "cyclic_objects": attrib.get("cyclic_objects", 0),
            "cycles": attrib.get("cycles", 0), "exceptions": attrib.get("exceptions", {}),
            "batches": attrib["batches"], "messages": attrib["messages"],
            "kinds": attrib.get("kinds", []), "other_objects": attrib.get("other_objects", 0)}

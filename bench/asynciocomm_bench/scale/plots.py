"""PNG plots of the ``scale`` section: per-task costs against the worker count,
and the scheduler's MainThread categories at the largest worker count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asynciocomm_bench.common.plotting import pyplot, stacked_shares
from asynciocomm_bench.scale import ratios as sr
from asynciocomm_bench.scale.metrics import STATS, metric_name

#: Per-workload plots against W: scheduler process CPU and event-loop thread
#: CPU per task for every workload, wall time for the short tasks.
CURVES = (("sched_cpu_us", None), ("loop_cpu_us", ("map",)), ("wall_s", ("map",)))
#: One colour per comm pair, solid for stock, dashed for asynciocomm; markers per loop.
COLORS = {"tcp": "#4c72b0", "asyncio": "#4c72b0", "tls": "#c44e52", "asyncio+tls": "#c44e52"}
MARKERS = {"asyncio": "o", "uvloop": "s"}


def curve_plot(sec: dict[str, Any], workload: str, stat: str, outdir: Path) -> str | None:
    """One line per scheme@loop: the median of ``stat`` against W, with its range."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    drawn = False
    for cfg in sec["configs"]:
        xs, med, lo, hi = [], [], [], []
        for w in sec["workers"]:
            v = sr.values(sec, cfg["label"], metric_name(workload, w, stat))
            if v is None:
                continue
            xs.append(w)
            med.append(v["median"])
            lo.append(v["median"] - v["lo"])
            hi.append(v["hi"] - v["median"])
        if not xs:
            continue
        drawn = True
        ours = cfg["scheme"] != cfg["stock"]
        ax.errorbar(xs, med, yerr=[lo, hi], label=cfg["label"], capsize=3,
                    color=COLORS.get(cfg["scheme"], "#55a868"),
                    linestyle="--" if ours else "-",
                    marker=MARKERS.get(cfg["loop"], "^"))
    if not drawn:
        plt.close(fig)
        return None
    title, unit, _, _ = STATS[stat]
    ax.set_xscale("log", base=2)
    ax.set_xticks(sec["workers"])
    ax.set_xticklabels([str(w) for w in sec["workers"]])
    ax.set_xlabel("workers")
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    ax.set_title(f"{workload}: {title} (lower is better)", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    name = f"scale_{workload}_{stat}.png"
    fig.savefig(outdir / name, dpi=90)
    plt.close(fig)
    return name


def shares_plot(sec: dict[str, Any], outdir: Path) -> str | None:
    """Stacked bars of the flat categories, one bar per profiled scheme@loop."""
    from asynciocomm_bench.scale.categories import FLAT

    runs = [p for p in sec.get("profiles", []) if p.get("flat_shares")]
    if not runs:
        return None
    w = max(r["workers"] for r in runs)
    return stacked_shares(outdir, "scale_profile_shares.png",
                          [r["config"].replace("@", "\n@") for r in runs],
                          [r["flat_shares"] for r in runs], list(FLAT),
                          f"scheduler MainThread at {w} workers ({runs[0]['workload']})")


def render(doc: dict[str, Any], outdir: Path) -> list[str]:
    """Every plot of the scale section (file names written into ``outdir``)."""
    sec = doc.get("scale")
    if not sec or not sec.get("samples"):
        return []
    written = []
    for stat, only in CURVES:
        for wl in sec["workloads"]:
            if only is None or wl in only:
                name = curve_plot(sec, wl, stat, outdir)
                if name:
                    written.append(name)
    name = shares_plot(sec, outdir)
    return written + ([name] if name else [])

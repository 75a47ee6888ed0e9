"""PNG plots (matplotlib, Agg) of a result document, one per measurement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asynciocomm_bench.common.plotting import pyplot, safe_name, save, stacked_shares
from asynciocomm_bench.scale import plots as scale_plots


def section_plots(doc: dict[str, Any], name: str, outdir: Path) -> list[str]:
    """One bar chart per metric: medians per config, with each repetition as a dot."""
    sec = doc.get(name)
    if not sec:
        return []
    plt = pyplot()
    labels = [c["label"] for c in sec["configs"] if c["label"] in sec["summary"]]
    written: list[str] = []
    for metric, meta in sec["metrics"].items():
        labs = [lab for lab in labels if metric in sec["summary"].get(lab, {})]
        if not labs or not meta.get("plot", True):
            continue
        meds = [sec["summary"][lab][metric]["median"] or 0.0 for lab in labs]
        fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(labs) + 2), 3.6))
        colors = ["#c44e52" if lab == sec["reference"] else "#4c72b0" for lab in labs]
        ax.bar(range(len(labs)), meds, color=colors, alpha=0.8)
        for i, lab in enumerate(labs):
            pts = [s["value"] for s in sec["samples"]
                   if s["config"] == lab and s["metric"] == metric]
            ax.plot([i] * len(pts), pts, "k.", markersize=4)
        ax.set_xticks(range(len(labs)))
        ax.set_xticklabels(labs, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(meta.get("unit", ""))
        better = "higher" if meta.get("higher_is_better", True) else "lower"
        ax.set_title(f"{meta.get('title', metric)} ({better} is better)", fontsize=10)
        written.append(save(fig, outdir, f"{name}_{safe_name(metric)}.png"))
    return written


def profile_plot(doc: dict[str, Any], outdir: Path) -> list[str]:
    """Stacked bars of the scheduler's sample shares per category and run."""
    prof = doc.get("profile")
    if not prof or not prof.get("runs"):
        return []
    runs = prof["runs"]
    cats: list[str] = []
    for r in runs:
        cats += [c for c in r["shares"] if c not in cats]
    labels = [f"{r['config']}\ngc={'on' if r['gc'] else 'off'}" for r in runs]
    return [stacked_shares(outdir, "profile_shares.png", labels,
                           [r["shares"] for r in runs], cats)]


def ratio_plots(doc: dict[str, Any], name: str, outdir: Path) -> list[str]:
    """For a section whose metrics name their statistic (``stat``), one chart per
    statistic: a row per metric, and for each configuration the median of its
    ratios paired with the stock comm on its loop, with their range (log scale,
    > 1 is better)."""
    from matplotlib import ticker

    from asynciocomm_bench.common.stats import by_config, compare
    from asynciocomm_bench.report.ratios import peers

    sec = doc.get(name)
    if not sec:
        return []
    pairs, by = peers(sec), by_config(sec["samples"])
    stats = dict.fromkeys(m["stat"] for m in sec["metrics"].values() if m.get("stat"))
    plt, written = pyplot(), []
    for stat in stats:
        rows = [(k, m) for k, m in sec["metrics"].items() if m.get("stat") == stat]
        fig, ax = plt.subplots(figsize=(8.0, 0.42 * len(rows) + 1.6))
        for j, (lab, peer) in enumerate(pairs.items()):
            for i, (metric, meta) in enumerate(rows):
                c = compare(by, lab, peer, metric, meta.get("higher_is_better", True))
                if not c.n:
                    continue
                y = i + (j - (len(pairs) - 1) / 2) * 0.8 / max(1, len(pairs))
                ax.errorbar([c.median], [y], xerr=[[c.median - c.lo], [c.hi - c.median]],
                            fmt="o", markersize=4, capsize=2, color=f"C{j}",
                            label=f"{lab} vs {peer}" if i == 0 else None)
        ax.axvline(1.0, color="k", linewidth=0.8)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%.3g"))
        ax.xaxis.set_minor_formatter(ticker.FormatStrFormatter("%.3g"))
        ax.tick_params(axis="x", which="both", labelsize=7)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([m.get("workload", k) for k, m in rows], fontsize=8)
        ax.invert_yaxis()
        title = rows[0][1].get("title", stat).split(": ", 1)[-1]
        ax.set_title(f"{title}: speed-up against stock on the same loop (> 1 is better; "
                     "median and range of the pairs)", fontsize=9)
        ax.legend(fontsize=7, loc="best")
        written.append(save(fig, outdir, f"{name}_ratios_{safe_name(stat)}.png"))
    return written


def render_all(doc: dict[str, Any], outdir: str | Path) -> dict[str, list[str]]:
    """Write every plot into ``outdir``; returns file names per section."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    return {"comm": section_plots(doc, "comm", out),
            "cluster": section_plots(doc, "cluster", out),
            "workloads": ratio_plots(doc, "workloads", out),
            "ab": section_plots(doc, "ab", out),
            "profile": profile_plot(doc, out),
            "scale": scale_plots.render(doc, out)}

"""Markdown rendering of a result document (tables of medians and ratios)."""

from __future__ import annotations

import math
from typing import Any


def fmt(value: float | None) -> str:
    """A compact human number: 12,345 / 123.4 / 1.23."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    a = abs(value)
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 100:
        return f"{value:.0f}"
    if a >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _cell(entry: dict[str, Any] | None, is_ref: bool) -> str:
    if not entry:
        return "–"
    text = fmt(entry.get("median"))
    r = entry.get("ratio_ref")
    if not is_ref and r is not None:
        text += f" ({r:.2f}×)"
    return text


def section_table(sec: dict[str, Any], ratio_key: str = "ratio_ref") -> str:
    """Rows = metrics, columns = configs; cells are medians with ratios."""
    labels = [c["label"] for c in sec["configs"]]
    summary = sec["summary"]
    labels = [lab for lab in labels if lab in summary]
    lines = ["| metric | " + " | ".join(labels) + " |",
             "|---|" + "---|" * len(labels)]
    for metric, meta in sec["metrics"].items():
        if not any(metric in summary.get(lab, {}) for lab in labels):
            continue
        cells = []
        for lab in labels:
            entry = summary.get(lab, {}).get(metric)
            if ratio_key != "ratio_ref" and entry:
                entry = {"median": entry.get("median"), "ratio_ref": entry.get(ratio_key)}
            cells.append(_cell(entry, lab == sec["reference"] and ratio_key == "ratio_ref"))
        title = meta.get("title", metric)
        unit = meta.get("unit", "")
        if unit:
            title = f"{title}, {unit}"
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _environment(doc: dict[str, Any]) -> str:
    env = doc["environment"]
    v = env.get("versions", {})
    vers = ", ".join(f"{k} {val}" for k, val in v.items() if val)
    lines = [
        f"- date: {doc['created']}",
        f"- command: `{doc['command']}`",
        f"- machine: {env.get('cpu_model')}, {env.get('cpu_count')} cores, "
        f"{env.get('platform', '')}",
        f"- Python {env.get('python')}; {vers}",
    ]
    load = env.get("load") or {}
    if load:
        busy = load.get("busy_share_run")
        lines.append(
            f"- machine load during the run: busy share "
            f"{fmt(100 * busy) if busy is not None else '–'} % of all CPUs "
            f"(including the benchmark itself), load average at the end "
            f"{', '.join(f'{x:.2f}' for x in load.get('loadavg_end', []))}")
    return "\n".join(lines)


def _loop_classes(sec: dict[str, Any]) -> str:
    rows = [f"`{lab}`: " + ", ".join(f"{k} `{v}`" for k, v in cls.items())
            for lab, cls in sec.get("loop_classes", {}).items()]
    return "Loop classes actually used: " + "; ".join(rows) if rows else ""


def _notes(sec: dict[str, Any], name: str) -> str:
    out = [f"{sec.get('reps_done', '?')} repetition(s), interleaved; medians. "
           f"(×) is the speed-up against `{sec['reference']}` paired within each "
           "repetition: > 1 is better, for throughputs and for costs alike."]
    if sec.get("truncated"):
        out.append("**The time budget cut this section short.**")
    for err in sec.get("errors", [])[:10]:
        out.append(f"- error in {name} `{err['config']}` (rep {err['rep']}): "
                   f"{err['error'][:300]}")
    return "\n".join(out)


def _profile(prof: dict[str, Any]) -> str:
    runs = prof.get("runs", [])
    if not runs:
        return "No profile runs."
    cats: list[str] = []
    for run in runs:
        cats += [c for c in run["shares"] if c not in cats]
    heads = [f"{r['config']} gc={'on' if r['gc'] else 'off'}" for r in runs]
    lines = ["| category (share of MainThread samples) | " + " | ".join(heads) + " |",
             "|---|" + "---|" * len(runs)]
    for cat in cats:
        cells = [f"{100 * r['shares'].get(cat, 0.0):.1f} %" for r in runs]
        lines.append(f"| {cat} | " + " | ".join(cells) + " |")
    for key, label in (("comm_parts", "comm read + write"),
                       ("update_graph_parts", "update_graph")):
        parts: list[str] = []
        for run in runs:
            parts += [p for p in run.get(key, {}) if p not in parts]
        for part in parts:
            cells = [f"{100 * r.get(key, {}).get(part, 0.0):.1f} %" for r in runs]
            lines.append(f"| ↳ {label}: {part} | " + " | ".join(cells) + " |")
    lines.append("| samples | " + " | ".join(str(r["samples"]) for r in runs) + " |")
    over = []
    for r in runs:
        o = r.get("overhead") or {}
        over.append(f"{fmt(o.get('wall_ratio'))}× wall, {fmt(o.get('cpu_ratio'))}× CPU")
    lines.append("| py-spy overhead (with/without) | " + " | ".join(over) + " |")
    files = ", ".join(f"`{r['speedscope']}`" for r in runs)
    return "\n".join(lines) + f"\n\nSpeedscope files (open in speedscope.app): {files}"


HEADLINE = {
    "comm": ("ping_rts", "ping_cpu_us", "stream_msgs", "clients_32_rts",
             "bulk_128MiB_gibs"),
    "cluster": ("wide_gc_on_tps", "wide_gc_on_loop_cpu_us", "shuffle_gc_on_tps"),
}


def headline(doc: dict[str, Any]) -> str:
    """One line per non-tcp comm configuration: its key ratios against tcp@asyncio."""
    lines: list[str] = []
    for name, keys in HEADLINE.items():
        sec = doc.get(name)
        if not sec:
            continue
        for cfg in sec["configs"]:
            lab = cfg["label"]
            if lab == sec["reference"] or cfg.get("kind", "comm") != "comm":
                continue
            summ = sec["summary"].get(lab, {})
            parts = [f"{sec['metrics'][k]['title']} {summ[k]['ratio_ref']:.2f}×"
                     for k in keys if summ.get(k, {}).get("ratio_ref") is not None]
            if parts:
                lines.append(f"- {name} `{lab}`: " + "; ".join(parts))
    if not lines:
        return ""
    return ("Speed-ups against `tcp@asyncio` (paired medians; > 1 is better):\n\n"
            + "\n".join(lines))


def render(doc: dict[str, Any], plots: dict[str, list[str]] | None = None) -> str:
    """The whole markdown report of a result document."""
    plots = plots or {}
    out = [f"# asynciocomm-bench results ({doc.get('mode', '')})", "",
           _environment(doc), ""]
    head = headline(doc)
    if head:
        out += ["## Headline", "", head, ""]
    for name, title in (("comm", "Comm level"), ("cluster", "Scheduler-bound cluster")):
        sec = doc.get(name)
        if not sec:
            continue
        out += [f"## {title}", "", _notes(sec, name), "", section_table(sec), ""]
        if name == "comm" and sec.get("same_loop_refs"):
            out += ["Against `tcp` on the same loop (paired):", "",
                    section_table(sec, "ratio_same_loop"), ""]
        if name == "comm":
            out += ["References: `rawsock` = blocking sockets (sendall/recv_into) "
                    "between two processes; `rawaio@loop` = a bare asyncio Protocol "
                    "with no dask serialization; `rawtask@loop` = the same in the "
                    "Comm API's shape, a task awaiting each message; `rawaio+tls@loop` = "
                    "the bare protocol over the loop's TLS transport; `proto` = distributed's "
                    "`to_frames` + `from_frames` with no I/O (its CPU rows are "
                    "the cost of one message serialized and deserialized).", ""]
        lc = _loop_classes(sec)
        if lc:
            out += [lc, ""]
        out += [f"![{p}]({p})" for p in plots.get(name, [])]
        out.append("")
    if doc.get("profile"):
        out += ["## py-spy profile of the scheduler", "", _profile(doc["profile"]), ""]
        out += [f"![{p}]({p})" for p in plots.get("profile", [])]
    return "\n".join(out).rstrip() + "\n"

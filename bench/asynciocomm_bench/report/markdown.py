"""Markdown rendering of a result document (tables of medians and ratios)."""

from __future__ import annotations

import importlib
import math
from typing import Any

from asynciocomm_bench.report import ratios

#: The sections rendered as tables of medians and ratios, with their title and,
#: for some, the function (``module:name``) that renders what is theirs alone.
SECTIONS = {"comm": ("Comm level", None),
            "cluster": ("Scheduler-bound cluster", None),
            "workloads": ("Real workloads", "asynciocomm_bench.workloads.report:details"),
            "ab": ("A/B of a script", "asynciocomm_bench.ab.report:details")}

#: The comm section's bulk share tables, one per bare protocol (``ratios.RAW_KINDS``).
RAW_SHARE_INTROS = {
    "rawkeep": ("Bulk throughput against the bare protocol that keeps the bytes, on the "
                "same loop (`rawkeep@loop`, over TLS `rawkeep+tls@loop`; paired ratios, "
                "the share of the raw socket doing a comm's job; range; pairs):"),
    "rawaio": ("Bulk throughput against the bare protocol that drops each payload as it "
               "reads it, on the same loop (`rawaio@loop`, over TLS `rawaio+tls@loop`; "
               "paired ratios; range; pairs). Its 256 KiB of received bytes stay in the "
               "CPU's cache, which no receiver that keeps them can match on loopback:"),
}


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


def section_table(sec: dict[str, Any]) -> str:
    """Rows = metrics, columns = configs; cells are medians over the repetitions."""
    summary = sec["summary"]
    labels = [c["label"] for c in sec["configs"] if c["label"] in summary]
    lines = ["| metric | " + " | ".join(labels) + " |",
             "|---|" + "---|" * len(labels)]
    for metric, meta in sec["metrics"].items():
        if not any(metric in summary.get(lab, {}) for lab in labels):
            continue
        cells = [fmt((summary.get(lab, {}).get(metric) or {}).get("median")) for lab in labels]
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
    for run in doc.get("merged_from") or []:
        busy = (run.get("load") or {}).get("busy_share_run")
        lines.append(f"- merged run: {run['created']}, `{run['command']}`"
                     + (f", busy share {fmt(100 * busy)} %" if busy is not None else ""))
    return "\n".join(lines)


def _loop_classes(sec: dict[str, Any]) -> str:
    rows = [f"`{lab}`: " + ", ".join(f"{k} `{v}`" for k, v in cls.items())
            for lab, cls in sec.get("loop_classes", {}).items()]
    return "Loop classes actually used: " + "; ".join(rows) if rows else ""


def _notes(sec: dict[str, Any], name: str) -> str:
    out = [f"{sec.get('reps_done', '?')} repetition(s), interleaved (each configuration "
           "in turn, in fresh processes); medians over the repetitions."]
    if sec.get("placement") == "split":
        out.append("Placement `split`: the client pinned to one CPU and each server "
                   "process to another, as two hosts.")
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


def render(doc: dict[str, Any], plots: dict[str, list[str]] | None = None) -> str:
    """The whole markdown report of a result document."""
    plots = plots or {}
    out = [f"# asynciocomm-bench results ({doc.get('mode', '')})", "",
           _environment(doc), ""]
    head = ratios.headline(doc)
    if head:
        out += ["## Headline", "", head, ""]
    for name, (title, details) in SECTIONS.items():
        sec = doc.get(name)
        if not sec:
            continue
        out += [f"## {title}", "", _notes(sec, name), ""]
        if details:
            module, _, func = details.partition(":")
            out += [getattr(importlib.import_module(module), func)(sec), ""]
        out += ["Medians:", "", section_table(sec), ""]
        table = ratios.ratio_table(sec)
        if table:
            out += ["Against the stock comm on the same loop (paired ratios, > 1 is "
                    "better; range; pairs):", "", table, ""]
        for kind, intro in RAW_SHARE_INTROS.items():
            shares = ratios.raw_share_table(sec, kind) if name == "comm" else ""
            if shares:
                out += [intro, "", shares, ""]
        if name == "comm" and any(c.get("kind", "comm") != "comm" for c in sec["configs"]):
            out += ["References: `rawsock` = blocking sockets (sendall/recv_into) "
                    "between two processes; `rawaio@loop` = a bare asyncio Protocol "
                    "with no dask serialization; `rawtask@loop` = the same in the "
                    "Comm API's shape, a task awaiting each message; `rawaio+tls@loop` = "
                    "the bare protocol over the loop's TLS transport; `rawkeep@loop` "
                    "(`rawkeep+tls@loop`) = a bare buffered protocol that keeps every "
                    "payload, received in place, until the next message has arrived "
                    "(two buffers alternate), as a comm's reader must; `proto` = distributed's "
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
    if doc.get("scale") or doc.get("multihome"):
        from asynciocomm_bench.scale import markdown as scale_markdown

        out += ["", scale_markdown.render_doc(doc, plots.get("scale", []))]
    return "\n".join(out).rstrip() + "\n"

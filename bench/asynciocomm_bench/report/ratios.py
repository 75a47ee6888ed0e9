"""Each comm against the stock comm on the same loop, over paired repetitions.

A cell is the median of the ratios paired within each repetition, with their
range and their number, or "no measurable difference" when the range reaches
1.0 or rests on fewer than ``MIN_PAIRS`` pairs. The ratios are computed here from
the samples of a result document, so a document saved before the ranges were
kept renders the same way.
"""

from __future__ import annotations

from typing import Any

from asynciocomm_bench.common.options import is_tls, stock_peer
from asynciocomm_bench.common.stats import MIN_PAIRS, NOISE, Comparison, by_config, cell, compare

#: The headline's rows, in order; a row shows where the run measured it.
HEADLINE: dict[str, tuple[str, ...] | None] = {
    "comm": ("ping_rts", "ping_cpu_us", "stream_msgs", "bulk_64KiB_gibs", "bulk_1MiB_gibs",
             "bulk_4MiB_gibs", "bulk_16MiB_gibs", "bulk_32MiB_gibs", "bulk_64MiB_gibs",
             "bulk_128MiB_gibs", "clients_32_rts"),
    "cluster": ("wide_gc_on_wall_s", "wide_gc_on_loop_cpu_us", "tree_gc_on_wall_s",
                "shuffle_gc_on_wall_s"),
    # the scale bench's short tasks (20,000 in one map) at 2, 64 and 256 workers,
    # and its large graph where it ran (the full preset: 256, the record: 64)
    "scale": ("map_w2_sched_cpu_us", "map_w64_sched_cpu_us", "map_w256_sched_cpu_us",
              "map_w256_loop_cpu_us", "map_w256_wall_s", "graph_w64_sched_cpu_us",
              "graph_w256_sched_cpu_us"),
    # sections whose metrics say themselves which are headline rows
    "workloads": None,
    "ab": None,
}

LEGEND = (
    "Each comm against the stock comm on the same event loop (`asyncio@uvloop` against "
    "`tcp@uvloop`, `asyncio+tls@uvloop` against `tls@uvloop`): the median of the ratios "
    "paired within each repetition, > 1 is better (for throughputs and costs alike), "
    "then the range of those ratios and their number. A range that reaches 1.0, or "
    f"fewer than {MIN_PAIRS} pairs, is worded as {NOISE}.")


def peers(sec: dict[str, Any]) -> dict[str, str]:
    """Each configuration of a section that has a stock peer measured in the same
    run: label -> the peer's label (from the configurations, not from the
    document's own map, which older runs filled with tcp for TLS schemes too)."""
    labels = {c["label"] for c in sec["configs"]}
    out: dict[str, str] = {}
    for c in sec["configs"]:
        scheme = c.get("scheme")
        tls = c.get("tls", is_tls(scheme or ""))
        peer = stock_peer(c.get("kind", "comm"), scheme, c.get("loop"), bool(tls))
        if peer in labels:
            out[c["label"]] = peer
    return out


def _comparisons(sec: dict[str, Any], metric: str,
                 pairs: dict[str, str]) -> dict[str, Comparison | None]:
    meta = sec["metrics"].get(metric, {})
    if not meta.get("ratio", True):
        return {lab: None for lab in pairs}
    by = by_config(sec["samples"])
    higher = meta.get("higher_is_better", True)
    return {lab: compare(by, lab, peer, metric, higher) for lab, peer in pairs.items()}


def _title(meta: dict[str, Any], metric: str) -> str:
    unit = meta.get("unit", "")
    return meta.get("title", metric) + (f", {unit}" if unit else "")


def _table(rows: list[tuple[str, list[str]]], heads: list[str], first: str) -> str:
    lines = [f"| {first} | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    lines += [f"| {title} | " + " | ".join(cells) + " |" for title, cells in rows]
    return "\n".join(lines)


def ratio_table(sec: dict[str, Any]) -> str:
    """Every ratio metric of a section, for every configuration with a stock peer."""
    pairs = peers(sec)
    if not pairs:
        return ""
    rows = []
    for metric, meta in sec["metrics"].items():
        if not meta.get("ratio", True):
            continue
        comps = _comparisons(sec, metric, pairs)
        if all(c is None or not c.n for c in comps.values()):
            continue
        rows.append((_title(meta, metric), [cell(comps[lab]) for lab in pairs]))
    heads = [f"`{lab}` vs `{peer}`" for lab, peer in pairs.items()]
    return _table(rows, heads, "metric") if rows else ""


#: The bare protocols a comm's bulk rows are set against: ``rawkeep`` keeps
#: every payload as a comm's reader must (the goal's reference), ``rawaio``
#: drops it as it reads (an upper bound no comm can reach on loopback).
RAW_KINDS = ("rawkeep", "rawaio")


def raw_peer(config: dict[str, Any], kind: str = "rawaio") -> str | None:
    """The bare protocol ``kind`` on a comm's own loop and transport, a physical
    limit its bulk rows are set against: ``kind@loop``, over TLS
    ``kind+tls@loop``; None for anything but a comm."""
    if config.get("kind", "comm") != "comm" or not config.get("loop"):
        return None
    tls = config.get("tls", is_tls(config.get("scheme") or ""))
    return f"{kind}{'+tls' if tls else ''}@{config['loop']}"


def raw_share_table(sec: dict[str, Any], kind: str = "rawaio") -> str:
    """Every comm's bulk throughput against the bare protocol ``kind`` on its
    loop (stock comms too), paired within each repetition: the share of the
    raw socket."""
    labels = {c["label"] for c in sec["configs"]}
    pairs = {c["label"]: peer for c in sec["configs"]
             if (peer := raw_peer(c, kind)) is not None and peer in labels}
    metrics = [m for m in sec["metrics"] if m.startswith("bulk_") and m.endswith("_gibs")]
    if not pairs or not metrics:
        return ""
    by = by_config(sec["samples"])
    rows = []
    for metric in metrics:
        comps = {lab: compare(by, lab, peer, metric, True) for lab, peer in pairs.items()}
        if all(not c.n for c in comps.values()):
            continue
        rows.append((_title(sec["metrics"][metric], metric),
                     [cell(comps[lab]) for lab in pairs]))
    heads = [f"`{lab}` vs `{peer}`" for lab, peer in pairs.items()]
    return _table(rows, heads, "metric") if rows else ""


def headline(doc: dict[str, Any]) -> str:
    """The headline: its legend and one table, comm rows first, one column per
    comm (not a reference) that has a stock peer on its loop."""
    columns: list[tuple[str, str]] = []
    rows: list[tuple[str, dict[tuple[str, str], str]]] = []
    for name, keys in HEADLINE.items():
        sec = doc.get(name)
        if not sec:
            continue
        kinds = {c["label"]: c.get("kind", "comm") for c in sec["configs"]}
        pairs = {lab: peer for lab, peer in peers(sec).items() if kinds[lab] == "comm"}
        columns += [col for col in pairs.items() if col not in columns]
        if keys is None:
            keys = tuple(m for m, meta in sec["metrics"].items() if meta.get("headline"))
        for metric in keys:
            if metric not in sec["metrics"]:
                continue
            comps = _comparisons(sec, metric, pairs)
            if all(c is None or not c.n for c in comps.values()):
                continue
            rows.append((_title(sec["metrics"][metric], metric),
                         {(lab, peer): cell(comps[lab]) for lab, peer in pairs.items()}))
    if not rows:
        return ""
    heads = [f"`{lab}` vs `{peer}`" for lab, peer in columns]
    table = _table([(title, [cells.get(col, "–") for col in columns]) for title, cells in rows],
                   heads, "measurement")
    return f"{LEGEND}\n\n{table}"

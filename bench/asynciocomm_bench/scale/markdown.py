"""Markdown of the ``scale`` section: targets, costs against W, counts, profiles."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from asynciocomm_bench.common.options import stock_scheme
from asynciocomm_bench.scale import ratios as sr
from asynciocomm_bench.scale.categories import COMM, FLAT
from asynciocomm_bench.scale.metrics import STATS, metric_name

#: The issue's targets on the many-short-tasks workload: (stat, our scheme,
#: the most ours / stock may be, or with "speedup" the least stock / ours).
TARGETS = (("sched_cpu_us", "asyncio", 0.75, False),
           ("sched_cpu_us", "asyncio+tls", 0.65, False),
           ("wall_s", "asyncio", 1.25, True),
           ("wall_s", "asyncio+tls", 1.25, True))
COUNT_STATS = ("reads", "read_msgs", "writes", "write_msgs", "write_bytes",
               "wire_rx_bytes", "wire_tx_bytes", "wire_rx_pkts", "wire_tx_pkts")
#: Comm share over TLS at the largest W: at most this fraction of stock's.
COMM_SHARE_TARGET = 0.5


def _ours(sec: dict[str, Any], scheme: str) -> list[dict[str, Any]]:
    return [c for c in sec["configs"] if c["scheme"] == scheme]


def _verdict(c: Any, bound: float, speedup: bool) -> str:
    if c is None or not c.n:
        return "not measured"
    if not c.measurable:
        return "not met: no measurable difference"
    ok = c.median >= bound if speedup else 1 / c.median <= bound
    return "met" if ok else "not met"


def targets(sec: dict[str, Any]) -> str:
    """The targets table: one row per target, worker count and loop. CPU is a
    cost (ours / stock), wall time a speed-up (stock / ours)."""
    wmax = max(sec["workers"])
    ws = sorted({w for w in (64, wmax) if w in sec["workers"]})
    rows = ["| target | workers | loop | result | verdict |", "|---|---|---|---|---|"]
    for stat, scheme, bound, speedup in TARGETS:
        for w in ([wmax] if stat == "wall_s" else ws):
            for cfg in _ours(sec, scheme):
                c = sr.comparison(sec, cfg["label"], metric_name("map", w, stat))
                stock = stock_scheme(scheme)
                what = (f"wall time, `{scheme}` ≥ {bound}× faster than `{stock}`"
                        if speedup else
                        f"scheduler process CPU per task, `{scheme}` ≤ {bound}× `{stock}`")
                result = sr.speedup(c) if speedup else sr.cost(c)
                rows.append(f"| {what} | {w} | {cfg['loop']} | {result} "
                            f"| {_verdict(c, bound, speedup)} |")
    for (loop, scheme), (ours, stock) in sorted(comm_shares(sec).items()):
        ratio = ours / stock if stock else None
        verdict = "not measured" if ratio is None else \
            ("met" if ratio <= COMM_SHARE_TARGET else "not met")
        rows.append(f"| comm share of MainThread samples, `{scheme}` ≤ half of "
                    f"`{stock_scheme(scheme)}`'s | {wmax} | {loop} | "
                    f"{100 * ours:.1f} % vs {100 * stock:.1f} % "
                    f"({'–' if ratio is None else f'{ratio:.2f}×'}; one profile each) "
                    f"| {verdict} |")
    return "\n".join(rows)


def comm_shares(sec: dict[str, Any]) -> dict[tuple[str, str], tuple[float, float]]:
    """(loop, our scheme) -> (our comm share, stock's), from the profiles."""
    by = {(p["scheme"], p["loop"]): p.get("comm_share") for p in sec.get("profiles", [])}
    out = {}
    for (scheme, loop), share in by.items():
        stock = stock_scheme(scheme)
        if stock != scheme and share is not None and by.get((stock, loop)) is not None:
            out[(loop, scheme)] = (share, by[(stock, loop)])
    return out


def cost_table(sec: dict[str, Any], workload: str, stat: str) -> str:
    """Rows: workers; columns: scheme@loop; cells: median (range) and the ratio."""
    title, unit, _, _ = STATS[stat]
    labels = [c["label"] for c in sec["configs"]]
    head = [f"**{workload}: {title}** ({unit}; in brackets the range over the "
            f"repetitions; then the speed-up against stock on the same loop, paired, "
            f"> 1 is better)", "",
            "| workers | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels)]
    body: list[str] = []
    for w in sec["workers"]:
        if not any(sr.values(sec, lab, metric_name(workload, w, stat)) for lab in labels):
            continue
        cells = []
        for lab in labels:
            m = metric_name(workload, w, stat)
            cell = sr.fmt_value(sr.values(sec, lab, m))
            c = sr.comparison(sec, lab, m)
            if c is not None:
                cell += f"; {sr.speedup(c)}"
            cells.append(cell)
        body.append(f"| {w} | " + " | ".join(cells) + " |")
    return "\n".join(head + body) if body else ""  # no worker count ran it: no table


def count_table(sec: dict[str, Any], workload: str) -> str:
    """What the scheduler's comms read and write per task, per W and config."""
    labels = [c["label"] for c in sec["configs"]]
    stats = [s for s in COUNT_STATS
             if any(sr.values(sec, lab, metric_name(workload, w, s))
                    for lab in labels for w in sec["workers"])]
    rows = [f"**{workload}: per task, at the scheduler** (medians; comm counts from "
            "`asynciocomm_bench.scale.counting`, bytes and packets from the scheduler host's "
            "interface)", "",
            "| workers | config | " + " | ".join(STATS[s][0] for s in stats) + " |",
            "|---|---|" + "---|" * len(stats)]
    for w in sec["workers"]:
        for lab in labels:
            vals = [sr.values(sec, lab, metric_name(workload, w, s)) for s in stats]
            if any(vals):
                rows.append(f"| {w} | {lab} | " + " | ".join(
                    "–" if v is None else f"{v['median']:,.2f}" for v in vals) + " |")
    return "\n".join(rows)


def profile_table(sec: dict[str, Any]) -> str:
    """The flat MainThread categories of every profiled run, in %."""
    runs = [p for p in sec.get("profiles", []) if p.get("flat_shares")]
    if not runs:
        return "No profile."
    rows = ["| config | workers | samples | " + " | ".join(FLAT) + " | comm share |",
            "|---|---|---|" + "---|" * (len(FLAT) + 1)]
    for p in runs:
        rows.append(f"| {p['config']} | {p['workers']} | {p['samples']} | " + " | ".join(
            f"{100 * p['flat_shares'][c]:.1f}" for c in FLAT)
            + f" | {100 * p['comm_share']:.1f} |")
    return "\n".join(rows)


def _blocks(tables: Iterable[str]) -> list[str]:
    """The non-empty tables, each followed by a blank line."""
    return [line for t in tables if t for line in (t, "")]


def render(sec: dict[str, Any], plots: list[str] | None = None) -> str:
    """The whole scale section."""
    net = ("each host in a network namespace of its own, joined to one bridge by a "
           "veth link" if sec["network"] == "namespaces"
           else f"**loopback** (no namespaces: {sec['network_note']})")
    out = ["## Scale: many workers on separate hosts", "",
           f"- network: {net}; the scheduler, the client and up to {sec['hosts']} worker "
           f"hosts, each worker host one process of `Worker`s (nthreads=1) on one loop",
           f"- workers: {', '.join(map(str, sec['workers']))}; repetitions: "
           f"{sec['reps_done']}{' (time budget reached)' if sec['truncated'] else ''}, "
           f"interleaved; {sec['seconds'] / 60:.0f} min",
           f"- workloads: {', '.join(sec['workloads'])}; sizes {sec['sizes']}",
           "", "### Targets (many short tasks: `map`)", "", targets(sec), ""]
    out += _blocks(cost_table(sec, wl, "sched_cpu_us") for wl in sec["workloads"])
    out += ["### The short tasks in detail", ""]
    out += _blocks(cost_table(sec, "map", stat)
                   for stat in ("loop_cpu_us", "sched_sys_us", "wall_s", "workers_cpu_us",
                                "gc_cpu_us", "gc_freed", "gc_pause_ms"))
    out += [count_table(sec, "map"), ""]
    out += ["### The scheduler's MainThread at the largest worker count (py-spy, %)", "",
            profile_table(sec), "",
            f"Comm share = {' + '.join(COMM)}.", ""]
    out += [f"![{p}]({p})" for p in plots or []]
    if sec.get("errors"):
        out += ["", "### Errors", ""]
        out += [f"- rep {e.get('rep')}, {e.get('config')}, {e.get('workers')} workers, "
                f"{e.get('workload')}: {str(e.get('error'))[:300]}" for e in sec["errors"]]
    return "\n".join(out) + "\n"


def multihome(sec: dict[str, Any]) -> str:
    """The multi-homed worker check as a table."""
    out = ["## A worker on a multi-homed host", ""]
    if sec.get("skipped"):
        return "\n".join(out + [f"Not checked: {sec['skipped']}."])
    host = sec["worker_host"]
    out += [f"The worker host has `eth0` {host['eth0']} on the cluster's bridge (the "
            f"scheduler is {sec['scheduler']}) and `eth1` {host['eth1']}, which carries "
            "its default route and which no other host can reach. The worker listens "
            "on every interface (no `--host`).", "",
            "| case | advertised | interface | listener | scheduler reaches it | "
            "a task's result reaches the client |", "|---|---|---|---|---|---|"]
    for c in sec["cases"]:
        if c.get("skipped") or c.get("error"):
            why = str(c.get("skipped") or c.get("error")).strip().splitlines()[-1]
            out.append(f"| {c['case']} | {why.replace('|', '/')} | | | | |")
            continue
        out.append(f"| {c['case']} | `{c['advertised']}` | {c['interface']} | "
                   f"`{c.get('listener', '?').rsplit('.', 1)[-1]}` | "
                   f"{'yes' if c['scheduler_reaches_it'] else 'no'} | "
                   f"{'yes' if c.get('result_reaches_client') else 'no'} |")
    out += ["", "distributed's `Worker.start_unsafe` passes `default_host` (the address "
            "facing the scheduler) to its listener only when the protocol is `tcp` or "
            "`tls`; `patches/0002` passes it to every IP-based backend."]
    return "\n".join(out)


def render_doc(doc: dict[str, Any], plots: list[str] | None = None) -> str:
    """The scale and multi-homed sections of a result document."""
    parts = []
    if doc.get("scale"):
        parts.append(render(doc["scale"], plots))
    if doc.get("multihome"):
        parts.append(multihome(doc["multihome"]))
    return "\n".join(parts) + "\n"

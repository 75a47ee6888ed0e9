"""``comm``: A/B measurements of comm backends against physical limits.

Every configuration gets a fresh server process in every repetition, and
configurations are interleaved (A B C A B C ...) over repetitions.
"""

from __future__ import annotations

import dataclasses
import tempfile
from typing import Any

from asynciocomm_bench.comm import drivers, measure, references
from asynciocomm_bench.comm.serverproc import ServerProcess
from asynciocomm_bench.common import placement
from asynciocomm_bench.common.loops import run_on_loop, running_loop_class
from asynciocomm_bench.common.options import (
    REFERENCE_SCHEME,
    CommBounds,
    is_tls,
    reference_loop,
    stock_peer,
    stock_scheme,
)
from asynciocomm_bench.common.progress import Bar
from asynciocomm_bench.common.stats import summarize
from asynciocomm_bench.common.sweep import Sweep
from asynciocomm_bench.common.tlsfiles import TLSFiles, make_tls_files


@dataclasses.dataclass(frozen=True)
class CommConfig:
    """One column of the comm tables: a scheme or a reference, on one loop."""

    label: str
    kind: str  # "comm", "rawsock", "rawaio", "rawtask", "rawkeep" or "proto"
    scheme: str | None
    loop: str | None
    tls: bool


def metrics_for(bounds: CommBounds) -> dict[str, dict[str, Any]]:
    """Metadata of every comm metric: title, unit, direction."""
    m: dict[str, dict[str, Any]] = {
        "ping_rts": {"title": "ping ~100 B round trips", "unit": "rt/s"},
        "ping_p50_us": {"title": "ping p50 latency", "unit": "µs",
                        "higher_is_better": False},
        "ping_p99_us": {"title": "ping p99 latency", "unit": "µs",
                        "higher_is_better": False},
        "ping_cpu_us": {"title": "server CPU per round trip", "unit": "µs",
                        "higher_is_better": False},
        "ping_loop_cpu_us": {"title": "server event-loop thread CPU per round trip",
                             "unit": "µs", "higher_is_better": False, "plot": False},
        "stream_msgs": {"title": "stream 1 KiB one-way", "unit": "msg/s"},
        "stream_cpu_us": {"title": "server CPU per 1 KiB message", "unit": "µs",
                          "higher_is_better": False},
    }
    for size in sorted(bounds.bulk):
        lab = measure.size_label(size)
        m[f"bulk_{lab}_gibs"] = {"title": f"bulk {lab} one-way", "unit": "GiB/s"}
        m[f"bulk_{lab}_cpu_us"] = {"title": f"receiving server's CPU per {lab} message",
                                   "unit": "µs", "higher_is_better": False,
                                   "plot": size <= 64 * 1024}
        m[f"bulk_{lab}_send_cpu_us"] = {
            "title": f"sending client's CPU per {lab} message", "unit": "µs",
            "higher_is_better": False, "plot": False}
        m[f"bulk_{lab}_loop_cpu_us"] = {
            "title": f"server event-loop thread CPU per {lab} message", "unit": "µs",
            "higher_is_better": False, "plot": False}
        m[f"bulk_{lab}_faults"] = {"title": f"server page faults per {lab} message",
                                   "unit": "faults", "higher_is_better": False,
                                   "ratio": False, "plot": False}
        m[f"bulk_{lab}_colocated"] = {
            "title": f"share of the {lab} window client and server shared a CPU",
            "unit": "share", "higher_is_better": False, "ratio": False, "plot": False}
    for k in bounds.clients:
        m[f"clients_{k}_rts"] = {"title": f"{k} clients, total round trips",
                                 "unit": "rt/s"}
    for v in m.values():
        v.setdefault("higher_is_better", True)
    return m


def build_configs(schemes: list[str], loops: list[str], refs: bool) -> list[CommConfig]:
    """tcp, the stock comm each scheme is set against (``stock_scheme``) and the
    schemes, each on every loop (tcp on the reference loop first), then references."""
    ref_loop = reference_loop(loops)
    out = [CommConfig(f"{REFERENCE_SCHEME}@{ref_loop}", "comm", REFERENCE_SCHEME, ref_loop, False)]
    for scheme in dict.fromkeys([REFERENCE_SCHEME, *map(stock_scheme, schemes), *schemes]):
        for loop in loops:
            label = f"{scheme}@{loop}"
            if all(c.label != label for c in out):
                out.append(CommConfig(label, "comm", scheme, loop, is_tls(scheme)))
    if refs:
        out.append(CommConfig("rawsock", "rawsock", None, None, False))
        if any(is_tls(s) for s in schemes):
            out.append(CommConfig("rawsock+tls", "rawsock", None, None, True))
        for loop in loops:
            out.append(CommConfig(f"rawaio@{loop}", "rawaio", None, loop, False))
        for loop in loops:
            out.append(CommConfig(f"rawtask@{loop}", "rawtask", None, loop, False))
        for loop in loops:
            out.append(CommConfig(f"rawkeep@{loop}", "rawkeep", None, loop, False))
        if any(is_tls(s) for s in schemes):
            for loop in loops:  # the loop's own TLS transport, with nothing on top
                out.append(CommConfig(f"rawaio+tls@{loop}", "rawaio", None, loop, True))
            for loop in loops:
                out.append(CommConfig(f"rawkeep+tls@{loop}", "rawkeep", None, loop, True))
        out.append(CommConfig("proto", "proto", None, None, False))
    return out


def _run_one(cfg: CommConfig, bounds: CommBounds, tls: TLSFiles | None,
             bar: Bar, cpu_thread: bool = False,
             where: str = "free") -> tuple[dict[str, float], dict[str, Any]]:
    """Measure one configuration once, its two processes placed as ``where``
    says (see :mod:`placement`); returns (metrics, loop classes)."""
    if cfg.kind == "proto":
        return references.proto_run(bounds), {"client": "asyncio (no I/O)"}
    spec = {"kind": "rawaio" if cfg.kind in ("rawtask", "rawkeep") else cfg.kind,
            "task": cfg.kind == "rawtask", "keep": cfg.kind == "rawkeep",
            "scheme": cfg.scheme, "loop": cfg.loop,
            "tls": dataclasses.asdict(tls) if (cfg.tls and tls) else None,
            "cpu_thread": cpu_thread}
    with (ServerProcess(spec) as server, placement.placed(where, server.proc.pid),
          placement.Colocation(server.proc.pid) as colocation):

        def server_usage() -> measure.Usage:
            same, sampled = colocation.counts()
            return server.usage()._replace(same_cpu=same, sampled=sampled)

        classes: dict[str, Any] = {"server": server.loop_class}
        client_args: dict[str, Any] = {}
        if cfg.tls and tls:
            client_args = tls.security().get_connection_args("client")
        ssl_context = client_args.get("ssl_context")
        if cfg.kind == "rawsock":
            res = references.rawsock_run(server.address, ssl_context, bounds,
                                         server_usage, bar.advance)
            return res, classes

        async def client() -> dict[str, float]:
            classes["client"] = running_loop_class()
            driver: Any
            if cfg.kind == "comm":
                driver = drivers.CommDriver(server.address, client_args)
            else:
                driver = drivers.RawAioDriver(server.address, ssl_context)
            return await measure.run_all(driver, bounds, server_usage, bar.advance)

        assert cfg.loop is not None
        return run_on_loop(client, cfg.loop), classes


def run_comm(schemes: list[str], loops: list[str], bounds: CommBounds, *,
             refs: bool = True, quiet: bool = False,
             cpu_thread: bool = False, where: str = "free") -> dict[str, Any]:
    """Run the comm suite and return its JSON section. ``cpu_thread``: a
    CPU-bound pure-Python thread runs in every server process. ``where``: the
    client's and the servers' CPU placement (:mod:`placement`)."""
    configs = build_configs(schemes, loops, refs)
    metrics = metrics_for(bounds)
    samples: list[dict[str, Any]] = []
    loop_classes: dict[str, Any] = {}
    steps = measure.steps(bounds)
    sweep = Sweep("comm", bounds.reps, bounds.budget_s)
    with tempfile.TemporaryDirectory(prefix="asynciocomm-bench-tls-") as tmp:
        tls = make_tls_files(tmp) if any(c.tls for c in configs) else None
        with Bar(bounds.reps * len(configs) * steps, "comm", quiet) as bar:
            for rep in sweep.repetitions(bar.log):
                for cfg in configs:
                    bar.describe(f"rep {rep + 1}/{bounds.reps} {cfg.label}")
                    try:
                        values, classes = _run_one(cfg, bounds, tls, bar, cpu_thread, where)
                    except Exception as exc:
                        sweep.failed(rep, cfg.label, exc)
                        bar.log(f"comm {cfg.label} failed: {type(exc).__name__}: "
                                f"{str(exc)[:200]}", error=True)
                        continue
                    loop_classes[cfg.label] = classes
                    samples += [{"rep": rep, "config": cfg.label, "metric": k,
                                 "value": float(v)} for k, v in values.items()]
    labels = {c.label for c in configs}
    peers = {c.label: stock_peer(c.kind, c.scheme, c.loop, c.tls) for c in configs}
    same_loop = {lab: peer for lab, peer in peers.items() if peer in labels}
    reference = configs[0].label
    return {
        "configs": [dataclasses.asdict(c) for c in configs],
        "reference": reference,
        "same_loop_refs": same_loop,
        "metrics": metrics,
        "samples": samples,
        "summary": summarize(samples, metrics, reference, same_loop),
        "loop_classes": loop_classes,
        "bounds": {**dataclasses.asdict(bounds),
                   "bulk": {str(k): v for k, v in bounds.bulk.items()}},
        "cpu_thread": cpu_thread,
        "placement": where,
        "reps_done": sweep.reps_done,
        "truncated": sweep.truncated,
        "errors": sweep.errors,
        "seconds": sweep.seconds(),
    }

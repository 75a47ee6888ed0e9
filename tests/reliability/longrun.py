"""``python -m tests.reliability``: the long runs of the reliability suite.

For each scheme (default ``asyncio`` and stock ``tcp``) and event loop, against a
listener in its own process (``tests.peers.server``, memory read from /proc):

* hostile inputs (``tests.peers.hostile.hostile_inputs``), ``--hostile-copies`` of each
  at once: connections aborted or left open, peak RSS and virtual size growth;
* ``--idle`` idle half-open connections: still serving? RSS and descriptors per
  idle connection, descriptors back after they go;
* ``--cycles`` connect/handshake/ping/close cycles: descriptor counts of both
  processes before and after;
* the integrity soak: checksummed random messages until ``--soak-bytes`` have
  gone both ways, messages up to ``--soak-max``; each comm then asks for a burst
  written right before ``close()``.

Writes ``reliability.json`` and ``reliability.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import resource
import time
from pathlib import Path
from typing import Any

from dask.utils import format_bytes, parse_bytes


def build_parser() -> argparse.ArgumentParser:
    """The command line's options."""
    p = argparse.ArgumentParser(prog="python -m tests.reliability",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--schemes", default="asyncio,tcp",
                   help="comma-separated schemes (asyncio, tcp, asyncio+tls, tls)")
    p.add_argument("--loops", default="asyncio,uvloop", help="asyncio, uvloop")
    p.add_argument("--idle", type=int, default=5000, help="idle half-open connections")
    p.add_argument("--cycles", type=int, default=10000, help="connect/close cycles")
    p.add_argument("--hostile-copies", type=int, default=20,
                   help="connections per hostile input, at once")
    p.add_argument("--soak-bytes", default="4GiB", help="payload to carry in the soak")
    p.add_argument("--soak-max", default="256MiB", help="largest soak message")
    p.add_argument("--soak-comms", type=int, default=16, help="concurrent soak comms")
    p.add_argument("--only", default="hostile,idle,cycles,soak",
                   help="comma-separated parts to run")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default ./bench-results/reliability-<stamp>)")
    return p


def _raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    except (ValueError, OSError):
        return soft


def _tls_spec(scheme: str, out: Path) -> Any:
    from tests.certs import make_certs
    from tests.peers.conn import TLSSpec, is_tls

    if not is_tls(scheme):
        return None
    (out / "tls").mkdir(parents=True, exist_ok=True)
    certs = make_certs(str(out / "tls"))
    return TLSSpec(ca=certs.ca, cert=certs.cert)


async def _hostile(server: Any, tls: Any, copies: int) -> dict[str, Any]:
    from tests.peers.conn import client_ssl_context, connect_args, roundtrip
    from tests.peers.hostile import RawPeer, hostile_inputs

    sec = tls.security() if tls else None
    ctx = client_ssl_context(sec) if sec else None
    await roundtrip(server.address, connect_args(sec))
    base = server.status()
    peak_reset = server.reset_peak()
    rows = []
    for h in hostile_inputs():
        peers = [await RawPeer.open(server.address, ctx) for _ in range(copies)]
        t0 = time.perf_counter()
        try:
            for p in peers:
                await p.send(h.data)
                if not h.invalid:
                    if tls:
                        await p.close()
                    else:
                        p.shutdown_write()
            if tls and not h.invalid:
                states = ["closed-by-us"] * copies
            else:
                states = await asyncio.gather(*(p.wait_closed_by_peer(5) for p in peers))
        finally:
            for p in peers:
                await p.close()
        took = time.perf_counter() - t0
        try:
            await asyncio.wait_for(roundtrip(server.address, connect_args(sec)), 30)
            serving = True
        except Exception:  # noqa: BLE001
            serving = False
        st = server.status()
        rows.append({
            "input": h.name, "invalid": h.invalid, "claim": h.claim, "copies": copies,
            "aborted": sum(s in ("eof", "reset") for s in states),
            "left_open": sum(s == "open" for s in states), "seconds": round(took, 3),
            "serving_after": serving, "alive": server.alive(),
            "VmHWM": st["VmHWM"], "VmPeak": st["VmPeak"],
        })
    end = server.status()
    return {"inputs": rows, "rss_before": base["VmRSS"], "peak_rss_after": end["VmHWM"],
            "peak_rss_growth": end["VmHWM"] - base["VmRSS"], "peak_reset": peak_reset,
            "vmpeak_before": base["VmPeak"], "vmpeak_after": end["VmPeak"],
            "log_tail": server.stderr()[-1500:]}


async def _idle(server: Any, tls: Any, n: int) -> dict[str, Any]:
    from tests.peers.conn import connect_args, roundtrip
    from tests.peers.hostile import open_idle_sockets, socket_state

    sec = tls.security() if tls else None
    await roundtrip(server.address, connect_args(sec))
    base, fds0 = server.status(), server.fds()
    t0 = time.perf_counter()
    socks = open_idle_sockets(server.address, n)
    opened = time.perf_counter() - t0
    try:
        await asyncio.sleep(1)
        t1 = time.perf_counter()
        await asyncio.gather(*(roundtrip(server.address, connect_args(sec)) for _ in range(20)))
        rt = time.perf_counter() - t1
        held = server.status()
        fds_held = server.fds()
        still_open = sum(socket_state(s) == "open" for s in socks)
    finally:
        for s in socks:
            s.close()
    fds_after = fds_held
    for _ in range(200):  # bounded: up to 20 s
        fds_after = server.fds()
        if fds_after <= fds0:
            break
        await asyncio.sleep(0.1)
    return {"connections": n, "open_seconds": round(opened, 2),
            "still_open_after_1s": still_open,
            "roundtrips_while_held": 20, "roundtrip_seconds": round(rt, 3),
            "rss_before": base["VmRSS"], "rss_held": held["VmRSS"],
            "rss_per_connection": (held["VmRSS"] - base["VmRSS"]) // max(1, n),
            "server_fds_before": fds0, "server_fds_held": fds_held,
            "server_fds_after": fds_after, "alive": server.alive()}


async def _cycles(server: Any, tls: Any, n: int) -> dict[str, Any]:
    from tests.peers.conn import connect_args, connect_close_cycles, roundtrip
    from tests.peers.procs import fd_count

    sec = tls.security() if tls else None
    await roundtrip(server.address, connect_args(sec))
    await asyncio.get_running_loop().run_in_executor(None, lambda: None)
    own0, srv0 = fd_count(), server.fds()
    t0 = time.perf_counter()
    done = await connect_close_cycles(server.address, connect_args(sec), n, concurrency=8,
                                      deadline=3600)
    took = time.perf_counter() - t0
    own1 = srv1 = -1
    for _ in range(100):
        own1, srv1 = fd_count(), server.fds()
        if own1 <= own0 and srv1 <= srv0:
            break
        await asyncio.sleep(0.1)
    return {"cycles": n, "completed": done, "seconds": round(took, 1),
            "client_fds_before": own0, "client_fds_after": own1,
            "server_fds_before": srv0, "server_fds_after": srv1,
            "leaked": max(0, own1 - own0) + max(0, srv1 - srv0), "alive": server.alive()}


async def _soak(server: Any, tls: Any, total: int, max_size: int, comms: int) -> dict[str, Any]:
    from tests.peers.conn import connect_args
    from tests.peers.soak import soak

    sec = tls.security() if tls else None
    stages = []
    carried = 0
    t0 = time.perf_counter()
    seed = 0
    # small and medium messages on many comms, then large ones on few (memory)
    plan = [(comms, min(max_size, 4 << 20), 40, 4), (max(2, comms // 4), max_size, 6, 1)]
    rss_peak = 0
    while carried < total and seed < 1000:
        for ncomms, msize, nmsgs, window in plan:
            seed += 1
            r = await soak(server.address, connect_args(sec), comms=ncomms, messages=nmsgs,
                           max_size=msize, seed=seed, burst=4, window=window, deadline=3600)
            stages.append({"comms": ncomms, "max_size": msize, **r.as_dict()})
            carried += r.bytes
            rss_peak = max(rss_peak, server.status()["VmHWM"])
            if not r.ok:
                break
        if stages and stages[-1]["problems"]:
            break
    took = time.perf_counter() - t0
    return {
        "bytes": carried, "messages": sum(s["messages"] for s in stages),
        "largest": max(s["largest"] for s in stages),
        "lost": sum(s["lost"] for s in stages),
        "reordered": sum(s["reordered"] for s in stages),
        "corrupted": sum(s["corrupted"] for s in stages),
        "problems": [p for s in stages for p in s["problems"]][:20],
        "rounds": len(stages), "seconds": round(took, 1), "server_peak_rss": rss_peak,
        "alive": server.alive(),
    }


def _one(scheme: str, loop: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from tests.peers.loops import run_on_loop
    from tests.peers.procs import ListenerProcess

    parts = set(args.only.split(","))
    tls = _tls_spec(scheme, out)
    res: dict[str, Any] = {"scheme": scheme, "loop": loop}

    async def main() -> None:
        for part in ("hostile", "idle", "cycles", "soak"):
            if part not in parts:
                continue
            print(f"[{scheme}/{loop}] {part} ...", flush=True)
            t0 = time.perf_counter()
            server = ListenerProcess(scheme, loop, tls)
            try:
                if part == "hostile":
                    res[part] = await _hostile(server, tls, args.hostile_copies)
                elif part == "idle":
                    res[part] = await _idle(server, tls, args.idle)
                elif part == "cycles":
                    res[part] = await _cycles(server, tls, args.cycles)
                else:
                    res[part] = await _soak(server, tls, parse_bytes(args.soak_bytes),
                                            parse_bytes(args.soak_max), args.soak_comms)
            except Exception as e:  # noqa: BLE001
                res[part] = {"error": f"{type(e).__name__}: {e}"}
            finally:
                res.setdefault(part, {})["server_log_tail"] = server.stop()[-800:]
            print(f"[{scheme}/{loop}] {part} done in {time.perf_counter() - t0:.1f} s",
                  flush=True)

    run_on_loop(main, loop)
    return res


def render(doc: dict[str, Any]) -> str:
    """Markdown summary of a reliability run."""
    cmd = doc["command"]
    lines = [f"# Reliability run {doc['started']}", "", f"Command: `{cmd}`", ""]
    for r in doc["runs"]:
        s, lo = r["scheme"], r["loop"]
        lines += [f"## {s} on {lo}", ""]
        h = r.get("hostile")
        if h and "inputs" in h:
            lines += ["| input | copies | aborted | left open | serving after |",
                      "|---|---|---|---|---|"]
            for row in h["inputs"]:
                lines.append(f"| {row['input']} | {row['copies']} | {row['aborted']} | "
                             f"{row['left_open']} | {row['serving_after']} |")
            lines += ["", f"Peak RSS under hostile input: {format_bytes(h['rss_before'])} -> "
                      f"{format_bytes(h['peak_rss_after'])} (growth "
                      f"{format_bytes(max(0, h['peak_rss_growth']))}); virtual peak "
                      f"{format_bytes(h['vmpeak_before'])} -> "
                      f"{format_bytes(h['vmpeak_after'])}", ""]
        elif h:
            lines += [f"hostile: {h.get('error')}", ""]
        i = r.get("idle")
        if i and "connections" in i:
            lines += [f"Idle half-open connections: {i['connections']} held, "
                      f"{i['still_open_after_1s']} still open after 1 s, 20 round trips "
                      f"in {i['roundtrip_seconds']} s while held, RSS "
                      f"{format_bytes(i['rss_before'])} -> {format_bytes(i['rss_held'])} "
                      f"(~{i['rss_per_connection']} B per connection), server fds "
                      f"{i['server_fds_before']} -> {i['server_fds_held']} -> "
                      f"{i['server_fds_after']}", ""]
        elif i:
            lines += [f"idle: {i.get('error')}", ""]
        c = r.get("cycles")
        if c and "cycles" in c:
            lines += [f"Connect/close cycles: {c['completed']}/{c['cycles']} in "
                      f"{c['seconds']} s; client fds {c['client_fds_before']} -> "
                      f"{c['client_fds_after']}, server fds {c['server_fds_before']} -> "
                      f"{c['server_fds_after']}; leaked {c['leaked']}", ""]
        elif c:
            lines += [f"cycles: {c.get('error')}", ""]
        k = r.get("soak")
        if k and "bytes" in k:
            lines += [f"Integrity soak: {k['messages']} messages, "
                      f"{format_bytes(k['bytes'])} (largest {format_bytes(k['largest'])}) "
                      f"in {k['seconds']} s; lost {k['lost']}, reordered {k['reordered']}, "
                      f"corrupted {k['corrupted']}; server peak RSS "
                      f"{format_bytes(k['server_peak_rss'])}", ""]
        elif k:
            lines += [f"soak: {k.get('error')}", ""]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> Path:
    """Run the reliability bench; returns the output directory."""
    import sys

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or Path("bench-results") / f"reliability-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    limit = _raise_fd_limit()
    doc: dict[str, Any] = {"started": stamp,
                           "command": "python -m tests.reliability " + " ".join(sys.argv[1:]),
                           "fd_limit": limit, "runs": []}
    for scheme in [s for s in args.schemes.split(",") if s]:
        for loop in [lo for lo in args.loops.split(",") if lo]:
            doc["runs"].append(_one(scheme, loop, args, out))
            (out / "reliability.json").write_text(json.dumps(doc, indent=1, default=str))
    (out / "reliability.md").write_text(render(doc))
    print(f"results: {out / 'reliability.json'}, report: {out / 'reliability.md'}")
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status."""
    run(build_parser().parse_args(argv))
    return 0

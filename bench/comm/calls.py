"""``calls``: Python function calls per small round trip, on the server's side.

The issue that set the comm's targets counted about 215 Python function calls
per round trip for the stock comm; this counts them the same way for every
scheme and loop. A listener runs on its own event loop in a thread of this
process; a client on the main thread sends ``n`` pings (the ``comm`` suite's
~100-byte message) and reads each echo. Only the listener's thread is profiled
(``sys.setprofile``), from the first ping after a warm-up until the last echo:
``py`` counts the Python frames entered (a function called, or a coroutine
resumed), ``c`` the C functions Python code called. Counts, not times: they do
not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from bench.common.loops import run_on_loop
from bench.common.options import BenchError, check_loops, check_schemes, is_tls
from bench.common.tlsfiles import make_tls_files

PING = {"op": "ping", "p": b"x" * 64}
WARMUP = 200


def _profile(counts: Counter[str]) -> Any:
    def prof(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            counts["py"] += 1
        elif event == "c_call":
            counts["c"] += 1

    return prof


def count_calls(scheme: str, loop: str, n: int = 2000, timeout: float = 60.0) -> dict[str, float]:
    """Python and C calls per round trip in a ``scheme`` listener on ``loop``
    (TLS schemes with a throwaway certificate)."""
    if is_tls(scheme):
        with tempfile.TemporaryDirectory(prefix="asynciocomm-calls-tls-") as tmp:
            security = make_tls_files(tmp).security()
            return _count(scheme, loop, n, timeout,
                          security.get_listen_args("scheduler"),
                          security.get_connection_args("client"))
    return _count(scheme, loop, n, timeout, {}, {})


def _count(scheme: str, loop: str, n: int, timeout: float, listen_args: dict[str, Any],
           connect_args: dict[str, Any]) -> dict[str, float]:
    counts: Counter[str] = Counter()
    ready = threading.Event()
    found: dict[str, Any] = {}

    async def serve() -> None:
        from distributed.comm import listen

        done = asyncio.Event()

        async def handle(comm: Any) -> None:
            try:
                while True:
                    msg = await comm.read()
                    if msg["op"] == "start":
                        counts.clear()
                        sys.setprofile(_profile(counts))
                    elif msg["op"] == "stop":
                        sys.setprofile(None)
                        break
                    await comm.write(msg)
            finally:
                sys.setprofile(None)
                await comm.close()
                done.set()

        listener = listen(f"{scheme}://127.0.0.1:0", handle, deserialize=True, **listen_args)
        await listener.start()
        found["address"] = listener.contact_address
        ready.set()
        try:
            await asyncio.wait_for(done.wait(), timeout)
        finally:
            listener.stop()

    def server_thread() -> None:
        try:
            run_on_loop(serve, loop)
        except BaseException as exc:  # reported by the caller
            found["error"] = exc
            ready.set()

    thread = threading.Thread(target=server_thread, name="calls-listener", daemon=True)
    thread.start()
    if not ready.wait(timeout) or "error" in found:
        raise BenchError(f"calls: {scheme}@{loop} listener did not start: {found.get('error')}")

    async def client() -> None:
        from distributed.comm import connect

        comm = await connect(found["address"], timeout=timeout, **connect_args)
        try:
            for _ in range(WARMUP):
                await comm.write(PING)
                await comm.read()
            # "start" is answered under the profiler: n + 1 round trips counted.
            await comm.write({"op": "start"})
            await comm.read()
            for _ in range(n):
                await comm.write(PING)
                await comm.read()
            await comm.write({"op": "stop"})
        finally:
            await comm.close()

    run_on_loop(client, loop)
    thread.join(timeout)
    if "error" in found:
        raise BenchError(f"calls: {scheme}@{loop} listener failed: {found['error']}")
    return {"py": counts["py"] / (n + 1), "c": counts["c"] / (n + 1)}


def run(args: argparse.Namespace) -> Path:
    """The ``calls`` subcommand: a table, and ``calls.json`` under ``--out``."""
    rows = []
    for scheme in check_schemes(args.schemes.split(",")):
        for loop in check_loops(args.loops.split(",")):
            got = count_calls(scheme, loop, args.n)
            rows.append({"scheme": scheme, "loop": loop, **got})
    lines = ["| scheme@loop | Python calls | C calls |", "|---|---|---|"]
    lines += [f"| {r['scheme']}@{r['loop']} | {r['py']:.0f} | {r['c']:.0f} |" for r in rows]
    table = "\n".join(lines)
    print(f"Per small round trip, server side ({args.n} round trips each):\n\n{table}")
    out: Path = args.out or Path("bench-results") / "calls"
    out.mkdir(parents=True, exist_ok=True)
    (out / "calls.json").write_text(json.dumps({"n": args.n, "rows": rows}, indent=1))
    return out


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``calls`` on an argparse subparsers object."""
    p = subparsers.add_parser("calls", help="Python function calls per round trip, server side",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--schemes", default="tcp,asyncio",
                   help="comma-separated schemes (tcp, tls, asyncio, asyncio+tls, ...)")
    p.add_argument("--loops", default="asyncio,uvloop", help="asyncio, uvloop")
    p.add_argument("-n", type=int, default=2000, help="round trips counted")
    p.add_argument("--out", type=Path, default=None, help="where calls.json goes")
    return p

"""``calls``: Python function calls per message, counted, not timed.

The issue that set the comm's targets counted about 215 Python function calls
per round trip for the stock comm; this counts them the same way for every
scheme and loop. A listener runs on its own event loop in a thread of this
process; a client on the main thread talks to it.

* Small round trips (the default): the client sends ``n`` pings (the ``comm``
  suite's ~100-byte message) and reads each echo. Only the listener's thread
  is profiled (``sys.setprofile``), from the first ping after a warm-up until
  the last echo.
* One-way bulk messages (``--bulk SIZE``): the client sends ``n`` messages of a
  ``to_serialize``'d NumPy array of SIZE bytes, as the ``comm`` suite's bulk
  test does. Counted apart: the sender's loop thread, the receiver's loop
  thread and distributed's offload thread, which (de)serializes messages
  above its ``OFFLOAD_THRESHOLD`` for either side.

``py`` counts the Python frames entered (a function called, or a coroutine
resumed), ``c`` the C functions Python code called. Counts do not depend on
the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from asynciocomm_bench.common.loops import run_on_loop
from asynciocomm_bench.common.options import BenchError, check_loops, check_schemes, is_tls
from asynciocomm_bench.common.tlsfiles import make_tls_files

PING = {"op": "ping", "p": b"x" * 64}
WARMUP = 200
#: One-way messages sent before counting: the receiver's buffer reuse and
#: distributed's offload thread are in their steady state from then on.
BULK_WARMUP = 3


def _profile(counts: Counter[str]) -> Any:
    def prof(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            counts["py"] += 1
        elif event == "c_call":
            counts["c"] += 1

    return prof


@contextlib.contextmanager
def _tls_args(scheme: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(listen args, connect args): a throwaway certificate for TLS schemes."""
    if not is_tls(scheme):
        yield {}, {}
        return
    with tempfile.TemporaryDirectory(prefix="asynciocomm-calls-tls-") as tmp:
        security = make_tls_files(tmp).security()
        yield security.get_listen_args("scheduler"), security.get_connection_args("client")


def count_calls(scheme: str, loop: str, n: int = 2000, timeout: float = 60.0) -> dict[str, float]:
    """Python and C calls per round trip in a ``scheme`` listener on ``loop``."""
    counts: Counter[str] = Counter()

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

    async def client(comm: Any) -> None:
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

    _converse(scheme, loop, handle, client, timeout)
    return {"py": counts["py"] / (n + 1), "c": counts["c"] / (n + 1)}


def count_bulk(scheme: str, loop: str, size: int, n: int = 20,
               timeout: float = 120.0) -> dict[str, dict[str, float]]:
    """Python and C calls per one-way message of ``size`` bytes: the sender's
    loop thread, the receiver's and distributed's offload thread."""
    import numpy as np
    from distributed.protocol.serialize import to_serialize
    from distributed.utils import _offload_executor

    sides: dict[str, Counter[str]] = {k: Counter() for k in ("send", "recv", "offload")}
    msg = {"op": "s", "p": to_serialize(np.arange(size, dtype="u1"))}

    async def handle(comm: Any) -> None:
        try:
            while (got := await comm.read())["op"] != "stop":
                if got["op"] == "start":
                    sys.setprofile(_profile(sides["recv"]))
                    await comm.write(got)
        finally:
            sys.setprofile(None)
        await comm.write(got)

    async def client(comm: Any) -> None:
        for _ in range(BULK_WARMUP):
            await comm.write(msg)
        await comm.write({"op": "start"})
        await comm.read()
        # The offload thread, and then this one: a call in the thread's queue runs there.
        _offload_executor.submit(sys.setprofile, _profile(sides["offload"])).result(timeout)
        sys.setprofile(_profile(sides["send"]))
        try:
            for _ in range(n):
                await comm.write(msg)
        finally:
            sys.setprofile(None)
        await comm.write({"op": "stop"})
        await comm.read()  # every message was read, and the receiver's count stopped
        _offload_executor.submit(sys.setprofile, None).result(timeout)

    _converse(scheme, loop, handle, client, timeout)
    return {side: {k: c[k] / n for k in ("py", "c")} for side, c in sides.items()}


def _converse(scheme: str, loop: str, handle: Callable[[Any], Awaitable[None]],
              client: Callable[[Any], Awaitable[None]], timeout: float) -> None:
    """Serve ``handle`` on a listener in a thread of its own and run ``client``
    on a comm to it, both on ``loop``; the comms are closed after either."""
    ready = threading.Event()
    found: dict[str, Any] = {}
    with _tls_args(scheme) as (listen_args, connect_args):

        async def serve() -> None:
            from distributed.comm import listen

            done = asyncio.Event()

            async def handler(comm: Any) -> None:
                try:
                    await handle(comm)
                finally:
                    await comm.close()
                    done.set()

            listener = listen(f"{scheme}://127.0.0.1:0", handler, deserialize=True,
                              **listen_args)
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
            raise BenchError(
                f"calls: {scheme}@{loop} listener did not start: {found.get('error')}")

        async def talk() -> None:
            from distributed.comm import connect

            comm = await connect(found["address"], timeout=timeout, **connect_args)
            try:
                await client(comm)
            finally:
                await comm.close()

        run_on_loop(talk, loop)
        thread.join(timeout)
    if "error" in found:
        raise BenchError(f"calls: {scheme}@{loop} listener failed: {found['error']}")


def run(args: argparse.Namespace) -> Path:
    """The ``calls`` subcommand: a table, and ``calls.json`` under ``--out``."""
    from dask.utils import format_bytes, parse_bytes

    size = parse_bytes(args.bulk) if args.bulk else 0
    if args.n is None:
        args.n = 20 if size else 2000
    rows = []
    for scheme in check_schemes(args.schemes.split(",")):
        for loop in check_loops(args.loops.split(",")):
            if size:
                got = count_bulk(scheme, loop, size, args.n)
                rows.append({"scheme": scheme, "loop": loop,
                             **{f"{side}_{k}": v for side, c in got.items()
                                for k, v in c.items()}})
            else:
                rows.append({"scheme": scheme, "loop": loop, **count_calls(scheme, loop, args.n)})
    if size:
        lines = ["| scheme@loop | sender's loop | receiver's loop | offload thread |",
                 "|---|---|---|---|"]
        lines += [f"| {r['scheme']}@{r['loop']} | {r['send_py']:.0f} / {r['send_c']:.0f} | "
                  f"{r['recv_py']:.0f} / {r['recv_c']:.0f} | "
                  f"{r['offload_py']:.0f} / {r['offload_c']:.0f} |" for r in rows]
        head = (f"Python / C calls per one-way {format_bytes(size)} message "
                f"({args.n} messages each):")
    else:
        lines = ["| scheme@loop | Python calls | C calls |", "|---|---|---|"]
        lines += [f"| {r['scheme']}@{r['loop']} | {r['py']:.0f} | {r['c']:.0f} |"
                  for r in rows]
        head = f"Per small round trip, server side ({args.n} round trips each):"
    table = "\n".join(lines)
    print(f"{head}\n\n{table}")
    out: Path = args.out or Path("bench-results") / "calls"
    out.mkdir(parents=True, exist_ok=True)
    (out / "calls.json").write_text(json.dumps({"n": args.n, "bulk": size, "rows": rows},
                                               indent=1))
    return out


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``calls`` on an argparse subparsers object."""
    p = subparsers.add_parser("calls", help="Python function calls per message, counted",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--schemes", default="tcp,asyncio",
                   help="comma-separated schemes (tcp, tls, asyncio, asyncio+tls, ...)")
    p.add_argument("--loops", default="asyncio,uvloop", help="asyncio, uvloop")
    p.add_argument("-n", type=int, default=None,
                   help="round trips (default 2000) or bulk messages (default 20) counted")
    p.add_argument("--bulk", default=None,
                   help="count one-way messages of this size (16MiB) instead of round trips")
    p.add_argument("--out", type=Path, default=None, help="where calls.json goes")
    return p

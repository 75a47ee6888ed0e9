"""One comm measurement, runnable by any install's interpreter (``between``).

``between`` compares two installs of asynciocomm (two checkouts' environments,
say), so this file must run under an interpreter whose ``bench`` package may be
older or absent: it imports nothing of the project, only the standard library,
dask, distributed and numpy, and it is run by path.

    python probe.py '{"test": "bulk", "size": 16777216, "loop": "uvloop",
                      "scheme": "asyncio", "seconds": 3}'

prints one JSON line: the client's figure (``value``: round trips/s, messages/s
or GiB/s; for ``clients`` with ``size`` N, the round trips/s of N concurrent
clients together), the messages timed, the server process's CPU and minor page
faults per message over them, and the client process's CPU per message (the
sender's, in a one-way test; every thread of the process: distributed serializes
messages above its offload threshold in a thread of its own). The server is a
subprocess of the same interpreter
(``probe.py server SPEC``), stopped by PID. The event loop is chosen through
``distributed.admin.event-loop``; no loop policy is installed.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import time
from typing import Any

#: Warm-up before timing: this many bytes, and at least 2 messages (a receiver
#: holds one while the next arrives, so its buffer reuse is steady from the second
#: on), as in asynciocomm_bench.comm.measure but without its 0.5 s cap: a probe times one
#: measurement, not a suite. A ping warms up with WARMUP_PINGS round trips, as
#: ``calls`` does.
WARMUP_BYTES = 256 * 1024**2
WARMUP_PINGS = 200
PING = {"op": "ping", "p": b"x" * 64}


def _run(main: Any, loop: str) -> Any:
    import dask
    from distributed.compatibility import asyncio_run
    from distributed.config import get_loop_factory

    with dask.config.set({"distributed.admin.event-loop": loop}):
        return asyncio_run(main(), loop_factory=get_loop_factory())


def _security(spec: dict[str, Any]) -> Any:
    from distributed.security import Security

    t = spec["tls"]
    return Security(tls_ca_file=t["ca_file"], tls_scheduler_cert=t["cert"],
                    tls_scheduler_key=t["key"], tls_client_cert=t["cert"],
                    tls_client_key=t["key"], require_encryption=True)


def _usage() -> tuple[float, int]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime, ru.ru_minflt


def serve(spec: dict[str, Any]) -> None:
    """Echo pings, count one-way messages; ``mark`` starts the usage count and
    ``sync`` answers with the messages and the usage since."""
    async def main() -> None:
        from distributed.comm import listen

        done = asyncio.Event()
        # Over every connection: messages counted and the usage they are counted from.
        state: dict[str, Any] = {"n": 0, "start": _usage()}

        async def handle(comm: Any) -> None:
            op = "error"
            try:
                while True:
                    msg = await comm.read()
                    op = msg["op"]
                    if op == "s":
                        state["n"] += 1
                    elif op == "ping":
                        state["n"] += 1
                        await comm.write(msg)
                    elif op == "mark":
                        state["n"], state["start"] = 0, _usage()
                        await comm.write(msg)
                    elif op == "sync":
                        cpu, faults = _usage()
                        await comm.write({"n": state["n"], "cpu": cpu - state["start"][0],
                                          "faults": faults - state["start"][1]})
                    else:
                        break
            finally:
                await comm.close()
                if op != "end":  # one of several clients is done; "bye" ends the run
                    done.set()

        args = _security(spec).get_listen_args("scheduler") if spec.get("tls") else {}
        listener = listen(f"{spec['scheme']}://127.0.0.1:0", handle,
                          deserialize=True, **args)
        await listener.start()
        print(listener.contact_address, flush=True)
        await asyncio.wait_for(done.wait(), spec["seconds"] * 4 + 120)
        listener.stop()

    _run(main, spec["loop"])


async def _clients(spec: dict[str, Any], address: str) -> dict[str, Any]:
    """``size`` clients doing ping round trips at once."""
    from distributed.comm import connect

    args = _security(spec).get_connection_args("client") if spec.get("tls") else {}
    comms = [await connect(address, timeout=30, **args) for _ in range(spec["size"])]
    control, secs = comms[0], spec["seconds"]
    counts = [0] * len(comms)

    async def pinger(i: int, until: float) -> None:
        comm = comms[i]
        while time.perf_counter() < until:
            await comm.write(PING)
            await comm.read()
            counts[i] += 1

    try:
        await asyncio.gather(*(pinger(i, time.perf_counter() + 0.5) for i in range(len(comms))))
        await control.write({"op": "mark"})
        await control.read()
        counts[:] = [0] * len(comms)
        t0 = time.perf_counter()
        await asyncio.gather(*(pinger(i, t0 + secs) for i in range(len(comms))))
        await control.write({"op": "sync"})
        got = await control.read()
        elapsed = time.perf_counter() - t0
        for comm in comms[1:]:
            await comm.write({"op": "end"})
        await control.write({"op": "bye"})
    finally:
        for comm in comms:
            await comm.close()
    n = sum(counts)
    if got["n"] != n:
        raise RuntimeError(f"the server counted {got['n']} round trips, the clients made {n}")
    return {"value": n / elapsed, "n": n, "server_cpu_us": got["cpu"] / n * 1e6,
            "server_faults": got["faults"] / n}


async def _measure(spec: dict[str, Any], address: str) -> dict[str, Any]:
    from distributed.comm import connect

    if spec["test"] == "clients":
        return await _clients(spec, address)
    args = _security(spec).get_connection_args("client") if spec.get("tls") else {}
    comm = await connect(address, timeout=30, **args)
    test, secs = spec["test"], spec["seconds"]
    if test == "ping":
        msg, size = PING, 0
    else:
        size = 1024 if test == "stream" else spec["size"]
        if size <= 4096:
            msg = {"op": "s", "p": b"x" * size}
        else:
            import numpy as np
            from distributed.protocol.serialize import to_serialize

            arr = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8)
            msg = {"op": "s", "p": to_serialize(arr)}
    try:
        warm = WARMUP_PINGS if test == "ping" else max(2, min(20_000, WARMUP_BYTES // size))
        for _ in range(warm):
            await comm.write(msg)
            if test == "ping":
                await comm.read()
        await comm.write({"op": "mark"})
        await comm.read()
        cpu0 = _usage()[0]
        n, t0 = 0, time.perf_counter()
        batch = 1 if size > 4096 else 100
        while time.perf_counter() - t0 < secs:
            for _ in range(batch):
                await comm.write(msg)
                if test == "ping":
                    await comm.read()
            n += batch
        await comm.write({"op": "sync"})
        got = await comm.read()
        elapsed = time.perf_counter() - t0
        client_cpu = _usage()[0] - cpu0
        await comm.write({"op": "bye"})
    finally:
        await comm.close()
    if test != "ping" and got["n"] != n:
        raise RuntimeError(f"the server counted {got['n']} messages, the client sent {n}")
    value = n * size / elapsed / 1024**3 if test == "bulk" else n / elapsed
    return {"value": value, "n": n, "server_cpu_us": got["cpu"] / n * 1e6,
            "server_faults": got["faults"] / n, "client_cpu_us": client_cpu / n * 1e6}


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Start a server of this interpreter, measure against it, stop it."""
    server = subprocess.Popen([sys.executable, __file__, "server", json.dumps(spec)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        address = server.stdout.readline().strip()
        if not address:
            raise RuntimeError("the probe's server did not start")
        return _run(lambda: _measure(spec, address), spec["loop"])
    finally:
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(json.loads(sys.argv[2]))
    else:
        print(json.dumps(measure(json.loads(sys.argv[1]))), flush=True)

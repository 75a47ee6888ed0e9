"""Before/after figures for patch 0003 (fewer reads in the Tornado comm).

Server and client run in separate processes and talk over
``distributed.comm.listen`` / ``distributed.comm.connect`` on ``tcp://127.0.0.1``.
Each process imports ``distributed`` from the tree given on the command line
(put first on ``PYTHONPATH``), so the shared venv's distributed stays untouched.

Workloads
  pingpong  client writes a small dict, server echoes it back; round trips/s
  stream    client writes N messages of 1 KiB (one bytes value) back to back
            with comm.write, server reads them all, then acks; messages/s as seen
            by the server (this is bound by the writer's CPU, not the reader's)
  blob      100000 such messages, encoded once with distributed's writer helpers
            and written to the socket as one blob: messages/s of the reader alone

Usage::

    python patches/evidence/tcp_read_bench.py \
        --tree before=/tmp/distributed-2026.8.0 \
        --tree after=/tmp/distributed-patched \
        --reps 7 [--loop asyncio|uvloop] [--json out.json]

Repetitions are interleaved (before, after, before, after, ... with the order
alternating each repetition) and the report gives medians and min/max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PINGPONG_N = 3000
STREAM_N = 20000
BLOB_N = 100000
WARMUP = 300
PAYLOAD = 1024
METRICS = (
    "pingpong_rt_per_s",
    "stream_msgs_per_s_server",
    "stream_msgs_per_s_wall",
    "blob_msgs_per_s_server",
    "blob_reader_cpu_us_per_msg",
    "blob_tornado_read_calls_per_msg",
)


# --------------------------------------------------------------------------- #
# Child processes
# --------------------------------------------------------------------------- #
def _count_stream_calls(stream) -> list:
    """Count calls to the Tornado IOStream's read_bytes and read_into"""
    counter = [0]
    for name in ("read_bytes", "read_into"):
        orig = getattr(stream, name)

        def wrapper(*args, _orig=orig, **kwargs):
            counter[0] += 1
            return _orig(*args, **kwargs)

        setattr(stream, name, wrapper)
    return counter


async def _server_main() -> None:
    import asyncio

    from distributed.comm import listen

    done = asyncio.Event()

    async def handle_comm(comm):
        try:
            while True:
                msg = await comm.read()
                op = msg["op"]
                if op == "ping":
                    await comm.write(msg)
                elif op == "stream":
                    n = msg["n"]
                    t0 = time.perf_counter()
                    for _ in range(n):
                        await comm.read()
                    dt = time.perf_counter() - t0
                    await comm.write({"op": "ack", "seconds": dt})
                elif op == "blob":
                    # The client writes n pre-encoded messages in one go, straight
                    # onto the stream: this times the reader alone
                    n = msg["n"]
                    calls = _count_stream_calls(comm.stream)
                    await comm.write({"op": "ready"})
                    t0 = time.perf_counter()
                    c0 = time.process_time()
                    for _ in range(n):
                        await comm.read()
                    dt = time.perf_counter() - t0
                    cpu = time.process_time() - c0
                    await comm.write(
                        {"op": "ack", "seconds": dt, "cpu": cpu, "calls": calls[0]}
                    )
                elif op == "bye":
                    break
        finally:
            await comm.close()
            done.set()

    async with listen("tcp://127.0.0.1:0", handle_comm) as listener:
        print(listener.contact_address, flush=True)
        await asyncio.wait_for(done.wait(), 300)


async def _client_main(address: str) -> None:
    from distributed.comm import connect

    comm = await connect(address)
    # Ping-pong of small messages
    for i in range(WARMUP):
        await comm.write({"op": "ping", "i": i})
        await comm.read()
    t0 = time.perf_counter()
    for i in range(PINGPONG_N):
        await comm.write({"op": "ping", "i": i})
        await comm.read()
    pingpong = PINGPONG_N / (time.perf_counter() - t0)

    # Pipelined stream of 1 KiB messages; the server times its own reads
    payload = b"x" * PAYLOAD
    await comm.write({"op": "stream", "n": STREAM_N})
    t0 = time.perf_counter()
    for i in range(STREAM_N):
        await comm.write({"op": "data", "i": i, "data": payload})
    ack = await comm.read()
    wall = time.perf_counter() - t0

    # Reader-bound pipelined stream: the same messages, encoded once with
    # distributed's own writer helpers (identical wire format before and after
    # the patch), written as one blob so that the writer costs nothing per message
    from distributed.comm.tcp import _add_frames_header
    from distributed.comm.utils import to_frames

    blob = bytearray()
    for i in range(BLOB_N):
        frames = await to_frames({"op": "data", "i": i, "data": payload})
        frames, _, _ = _add_frames_header(frames)
        for f in frames:
            blob += f
    await comm.write({"op": "blob", "n": BLOB_N})
    assert (await comm.read())["op"] == "ready"
    await comm.stream.write(bytes(blob))
    blob_ack = await comm.read()

    await comm.write({"op": "bye"})
    await comm.close()

    import distributed

    print(
        json.dumps(
            {
                "pingpong_rt_per_s": pingpong,
                "stream_msgs_per_s_server": STREAM_N / ack["seconds"],
                "stream_msgs_per_s_wall": STREAM_N / wall,
                "blob_msgs_per_s_server": BLOB_N / blob_ack["seconds"],
                "blob_reader_cpu_us_per_msg": 1e6 * blob_ack["cpu"] / BLOB_N,
                "blob_tornado_read_calls_per_msg": blob_ack["calls"] / BLOB_N,
                "distributed_file": distributed.__file__,
            }
        ),
        flush=True,
    )


def _run_child(role: str, address: str | None) -> None:
    from distributed.compatibility import asyncio_run
    from distributed.config import get_loop_factory

    coro = _server_main() if role == "server" else _client_main(address)
    asyncio_run(coro, loop_factory=get_loop_factory())


# --------------------------------------------------------------------------- #
# Driver
# --------------------------------------------------------------------------- #
def _env(tree: str, loop: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    env["DASK_DISTRIBUTED__ADMIN__EVENT_LOOP"] = loop
    return env


def run_once(tree: str, loop: str, timeout: float = 120) -> dict:
    env = _env(tree, loop)
    server = subprocess.Popen(
        [sys.executable, __file__, "--child", "server"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        address = server.stdout.readline().strip()
        if not address.startswith("tcp://"):
            raise RuntimeError(f"server did not report an address: {address!r}")
        client = subprocess.run(
            [sys.executable, __file__, "--child", "client", address],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if client.returncode:
            raise RuntimeError(client.stderr)
        result = json.loads(client.stdout.strip().splitlines()[-1])
        server.wait(timeout=timeout)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    if not result["distributed_file"].startswith(tree):
        raise RuntimeError(f"imported {result['distributed_file']}, not from {tree}")
    return result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--child", nargs="+")
    p.add_argument("--tree", action="append", default=[], help="label=path")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--loop", default="asyncio", choices=["asyncio", "tornado", "uvloop"])
    p.add_argument("--json")
    args = p.parse_args()
    if args.child:
        role, *rest = args.child
        _run_child(role, rest[0] if rest else None)
        return

    trees = [t.split("=", 1) for t in args.tree]
    results: dict[str, list[dict]] = {label: [] for label, _ in trees}
    for rep in range(args.reps):
        order = trees if rep % 2 == 0 else trees[::-1]
        for label, path in order:
            r = run_once(path, args.loop)
            results[label].append(r)
            print(
                f"rep {rep} {label:>8}: pingpong {r['pingpong_rt_per_s']:8.0f} rt/s, "
                f"stream {r['stream_msgs_per_s_server']:8.0f} msg/s (server), "
                f"{r['stream_msgs_per_s_wall']:8.0f} msg/s (wall), "
                f"reader-only {r['blob_msgs_per_s_server']:8.0f} msg/s "
                f"{r['blob_reader_cpu_us_per_msg']:.2f} us CPU/msg "
                f"{r['blob_tornado_read_calls_per_msg']:.3f} calls/msg",
                file=sys.stderr,
                flush=True,
            )

    summary = {}
    for label, rs in results.items():
        summary[label] = {}
        for key in METRICS:
            vals = [r[key] for r in rs]
            summary[label][key] = {
                "median": statistics.median(vals),
                "min": min(vals),
                "max": max(vals),
                "n": len(vals),
            }
    print(f"loop={args.loop} reps={args.reps} python={sys.version.split()[0]}")
    print(f"{'tree':>8} {'metric':>32} {'median':>10} {'min':>10} {'max':>10}")
    for label, metrics in summary.items():
        for key, s in metrics.items():
            print(
                f"{label:>8} {key:>32} {s['median']:10.3f} {s['min']:10.3f} "
                f"{s['max']:10.3f}"
            )
    if len(trees) == 2:
        (a, _), (b, _) = trees
        for key in summary[a]:
            ratio = summary[b][key]["median"] / summary[a][key]["median"]
            print(f"{b}/{a} {key}: {ratio:.3f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"loop": args.loop, "reps": args.reps, "summary": summary,
                       "raw": results}, f, indent=1)


if __name__ == "__main__":
    main()

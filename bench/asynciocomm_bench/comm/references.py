"""Physical-limit references of ``comm`` that are not async drivers.

``rawsock``: blocking sockets (sendall/recv_into) to a server process.
``proto``: distributed's own ``to_frames`` + ``from_frames`` with no I/O.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from asynciocomm_bench.comm import rawproto
from asynciocomm_bench.comm.measure import Usage, bulk_metrics, client_usage, warmup
from asynciocomm_bench.common.options import CommBounds
from asynciocomm_bench.common.stats import percentile

PING = rawproto.HDR.pack(64, rawproto.PING) + b"x" * 64


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    while len(view):
        n = sock.recv_into(view)
        if not n:
            raise ConnectionError("server closed")
        view = view[n:]


def _connect(address: str, ssl_ctx: Any) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ssl_ctx is not None:
        sock = ssl_ctx.wrap_socket(sock, server_hostname="localhost")
    return sock


def _sync(sock: socket.socket) -> int:
    sock.sendall(rawproto.HDR.pack(0, rawproto.SYNC))
    hdr = bytearray(rawproto.HDR.size)
    _recv_exact(sock, memoryview(hdr))
    return rawproto.HDR.unpack(hdr)[0]


def _ping(sock: socket.socket, bounds: CommBounds,
          server_usage: Callable[[], Usage]) -> dict[str, float]:
    reply = bytearray(len(PING))
    view = memoryview(reply)
    for _ in range(min(50, bounds.ping_n)):
        sock.sendall(PING)
        _recv_exact(sock, view)
    lat: list[float] = []
    cpu0 = server_usage().cpu
    t0 = time.perf_counter()
    deadline = t0 + bounds.ping_s
    for _ in range(bounds.ping_n):
        t = time.perf_counter()
        sock.sendall(PING)
        _recv_exact(sock, view)
        t2 = time.perf_counter()
        lat.append(t2 - t)
        if t2 > deadline:
            break
    elapsed = time.perf_counter() - t0
    return {
        "ping_rts": len(lat) / elapsed,
        "ping_p50_us": percentile(lat, 50) * 1e6,
        "ping_p99_us": percentile(lat, 99) * 1e6,
        "ping_cpu_us": (server_usage().cpu - cpu0) / len(lat) * 1e6,
    }


def rawsock_run(address: str, ssl_ctx: Any, bounds: CommBounds,
                server_usage: Callable[[], Usage],
                tick: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Ping-pong, 1 KiB stream and bulk over blocking sockets."""
    out: dict[str, float] = {}
    sock = _connect(address, ssl_ctx)
    try:
        if "ping" in bounds.parts:
            out.update(_ping(sock, bounds, server_usage))
            tick()
        plan = [(1024, bounds.stream_n, bounds.stream_s)] if "stream" in bounds.parts else []
        if "bulk" in bounds.parts:
            plan += [(s, n, t) for s, (n, t) in sorted(bounds.bulk.items())]
        for size, count, limit in plan:
            hdr = rawproto.HDR.pack(size, rawproto.SINK)
            if size <= 4096:
                frame: Any = hdr + b"x" * size
                payload = None
            else:
                frame = hdr
                arr = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8)
                payload = memoryview(arr).cast("B")
            for _ in warmup(size, count):
                sock.sendall(frame)
                if payload is not None:
                    sock.sendall(payload)
            _sync(sock)
            usage0 = server_usage()
            client0 = client_usage()
            t0 = time.perf_counter()
            deadline = t0 + limit
            sent = 0
            check = max(1, min(64, count // 8))
            for i in range(count):
                sock.sendall(frame)
                if payload is not None:
                    sock.sendall(payload)
                sent += 1
                if i % check == 0 and time.perf_counter() > deadline:
                    break
            got = _sync(sock)
            secs = time.perf_counter() - t0
            client = client_usage().since(client0)
            if got != sent:
                raise RuntimeError(f"rawsock server counted {got}, sent {sent}")
            used = server_usage().since(usage0)
            if size == 1024:
                out["stream_msgs"] = sent / secs
                out["stream_cpu_us"] = used.cpu / sent * 1e6
            else:
                out.update(bulk_metrics(size, sent, secs, used, client))
            tick()
        sock.sendall(rawproto.HDR.pack(0, rawproto.BYE))
    finally:
        sock.close()
    return out


def proto_run(bounds: CommBounds) -> dict[str, float]:
    """CPU µs of ``to_frames`` + ``from_frames`` per message, no I/O.

    Reported under the same metric names as the server CPU per operation
    (ping ~100 B, stream 1 KiB, bulk 64 KiB): one serialization and one
    deserialization of the message.
    """
    from distributed.comm.utils import from_frames, to_frames
    from distributed.protocol.serialize import to_serialize

    arr = np.random.default_rng(1).integers(0, 255, 64 * 1024, dtype=np.uint8)
    msgs = {
        "ping_cpu_us": {"op": "ping", "p": b"x" * 64},
        "stream_cpu_us": {"op": "s", "p": b"x" * 1024},
        "bulk_64KiB_cpu_us": {"op": "s", "p": to_serialize(arr)},
    }
    runs = {"ping_cpu_us": "ping" in bounds.parts, "stream_cpu_us": "stream" in bounds.parts,
            "bulk_64KiB_cpu_us": "bulk" in bounds.parts and 64 * 1024 in bounds.bulk}
    msgs = {k: m for k, m in msgs.items() if runs[k]}

    async def cost(msg: Any) -> float:
        for _ in range(20):
            await from_frames(await to_frames(msg))
        t0 = time.thread_time()
        w0 = time.perf_counter()
        n = 0
        while n < bounds.proto_n:
            await from_frames(await to_frames(msg))
            n += 1
            if time.perf_counter() - w0 > 1.0:
                break
        return (time.thread_time() - t0) / n * 1e6

    async def run() -> dict[str, float]:
        return {k: await cost(m) for k, m in msgs.items()}

    from asynciocomm_bench.common.loops import run_on_loop

    return run_on_loop(run, "asyncio")

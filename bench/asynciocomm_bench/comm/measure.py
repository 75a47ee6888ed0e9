"""The measurement loops of ``comm``, shared by every async target.

Every loop is bounded by a count and by a deadline. Server CPU and page faults
come from a ``server_usage()`` callable that returns the server process's
RUSAGE_SELF as a :class:`Usage`; the one-way loops also count the sending
side's own CPU (:func:`client_usage`), so that a message's cost shows up on
the side that pays it.
"""

from __future__ import annotations

import asyncio
import resource
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from asynciocomm_bench.common.options import CommBounds
from asynciocomm_bench.common.stats import percentile

GiB = 1024**3
#: Before a one-way size is timed, at least this many bytes of it are sent (at
#: least one message, at most WARMUP_S seconds). Every configuration runs in a
#: fresh server process, whose first large buffers pay the kernel's first touch
#: (huge-page compaction and zeroing): measured here, 50-280 ms for one of the
#: first 128 MiB messages against ~35 ms later, for tcp and asyncio alike. A
#: long-lived worker pays that once, so the bench times the steady state.
WARMUP_BYTES = 256 * 1024**2
WARMUP_S = 0.5
#: WARMUP_S never cuts the warm-up below this many messages: a receiver holds one
#: message while the next one arrives, so the reuse of its large buffers reaches
#: its steady state only with the second. Over TLS the first 128 MiB message alone
#: can take longer than WARMUP_S, and the second buffer's first touch then fell
#: into the timed window (72-183 faults per message, against 0 once warm).
WARMUP_MIN_MESSAGES = 2


class Usage(NamedTuple):
    """A process's RUSAGE_SELF: user+system CPU seconds and minor page faults.
    The faults show what a fresh receive buffer costs the kernel: a comm pays it
    per large frame unless it reuses buffers (asynciocomm's pool, the raw
    references' one buffer); the stock comm pays it."""

    cpu: float
    faults: int
    #: CPU seconds of the server's event-loop thread alone (0 where unknown):
    #: the process's CPU also counts its other threads (``--cpu-thread``'s)
    loop_cpu: float = 0.0
    #: Samples in which the client's event loop and the server's had last run on
    #: the same CPU, and all samples (``placement.Colocation``; 0 where unknown)
    same_cpu: int = 0
    sampled: int = 0

    def since(self, start: Usage) -> Usage:
        return Usage(self.cpu - start.cpu, self.faults - start.faults,
                     self.loop_cpu - start.loop_cpu, self.same_cpu - start.same_cpu,
                     self.sampled - start.sampled)


#: Threads of the bench process that do no comm work (the load sampler, the
#: progress bar's refresh): their CPU is not the sender's.
HOUSEKEEPING_PREFIX = "bench-"


def _housekeeping_cpu() -> float:
    total = 0.0
    for t in threading.enumerate():
        if t.ident is None or not (t.name.startswith(HOUSEKEEPING_PREFIX)
                                   or type(t).__module__.startswith("rich.")):
            continue
        try:
            total += time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        except (OSError, ProcessLookupError):  # it ended meanwhile
            pass
    return total


def client_usage() -> Usage:
    """The calling process's own :class:`Usage`: RUSAGE_SELF (every thread: the
    event loop's and distributed's offload thread, which serializes messages
    above its ``OFFLOAD_THRESHOLD``) less the bench's housekeeping threads, and
    the calling thread's CPU as ``loop_cpu``."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return Usage(ru.ru_utime + ru.ru_stime - _housekeeping_cpu(), ru.ru_minflt,
                 time.thread_time())


def warmup_messages(size: int, count: int) -> int:
    """Messages of ``size`` bytes to send before timing (see WARMUP_BYTES)."""
    return max(1, min(count, WARMUP_BYTES // size))


def warmup(size: int, count: int) -> Iterator[int]:
    """The warm-up's message numbers: ``warmup_messages`` of them, cut once
    WARMUP_S have passed and WARMUP_MIN_MESSAGES were sent."""
    stop = time.perf_counter() + WARMUP_S
    for i in range(warmup_messages(size, count)):
        if i >= WARMUP_MIN_MESSAGES and time.perf_counter() > stop:
            return
        yield i


def size_label(size: int) -> str:
    """64KiB, 1MiB, 128MiB..."""
    if size >= 1 << 20:
        return f"{size >> 20}MiB"
    return f"{size >> 10}KiB"


async def ping(driver: Any, conn: Any, n: int, secs: float,
               server_usage: Callable[[], Usage]) -> dict[str, float]:
    """Ping-pong: latency percentiles, round trips/s and server CPU per trip."""
    for _ in range(min(50, n)):
        await driver.ping(conn)
    lat: list[float] = []
    usage0 = server_usage()
    t0 = time.perf_counter()
    deadline = t0 + secs
    for i in range(n):
        t = time.perf_counter()
        await driver.ping(conn)
        t2 = time.perf_counter()
        lat.append(t2 - t)
        if t2 > deadline:
            break
    elapsed = time.perf_counter() - t0
    used = server_usage().since(usage0)
    return {
        "ping_rts": len(lat) / elapsed,
        "ping_p50_us": percentile(lat, 50) * 1e6,
        "ping_p99_us": percentile(lat, 99) * 1e6,
        "ping_cpu_us": used.cpu / len(lat) * 1e6,
        "ping_loop_cpu_us": used.loop_cpu / len(lat) * 1e6,
    }


class OneWay(NamedTuple):
    """What :func:`one_way` timed: messages, seconds, and the usage of the
    receiving server and of the sending client over them."""

    sent: int
    secs: float
    server: Usage
    client: Usage


async def one_way(driver: Any, conn: Any, size: int, n: int, secs: float,
                  server_usage: Callable[[], Usage]) -> OneWay:
    """Send up to ``n`` messages of ``size`` bytes within ``secs``, then sync."""
    msg = driver.message(size)
    for _ in warmup(size, n):
        await driver.send(conn, msg)
    await driver.sync(conn)
    usage0 = server_usage()
    client0 = client_usage()
    t0 = time.perf_counter()
    deadline = t0 + secs
    sent = 0
    check = max(1, min(256, n // 8))
    for i in range(n):
        await driver.send(conn, msg)
        sent += 1
        if i % check == 0 and time.perf_counter() > deadline:
            break
    got = await driver.sync(conn)
    elapsed = time.perf_counter() - t0
    client = client_usage().since(client0)
    if got != sent:
        raise RuntimeError(f"server counted {got} messages, client sent {sent}")
    return OneWay(sent, elapsed, server_usage().since(usage0), client)


async def concurrent(driver: Any, k: int, n: int, secs: float) -> float:
    """Aggregate round trips/s of ``k`` connections pinging at once."""
    conns = [await driver.connect() for _ in range(k)]
    try:
        for c in conns:
            await driver.ping(c)
        deadline = time.perf_counter() + secs

        async def one(c: Any) -> int:
            done = 0
            while done < n:
                await driver.ping(c)
                done += 1
                if time.perf_counter() > deadline:
                    break
            return done

        t0 = time.perf_counter()
        counts = await asyncio.gather(*(one(c) for c in conns))
        return sum(counts) / (time.perf_counter() - t0)
    finally:
        for c in conns:
            await driver.close(c)


def bulk_metrics(size: int, n: int, secs: float, used: Usage,
                 sender: Usage | None = None) -> dict[str, float]:
    """The bulk rows of one size: throughput, the receiving server's CPU and
    page faults per message, the sending client's CPU per message when
    ``sender`` is given, and the share of the window in which the two shared a
    CPU when ``used`` carries samples of it."""
    lab = size_label(size)
    out = {
        f"bulk_{lab}_gibs": n * size / secs / GiB,
        f"bulk_{lab}_cpu_us": used.cpu / n * 1e6,
        f"bulk_{lab}_loop_cpu_us": used.loop_cpu / n * 1e6,
        f"bulk_{lab}_faults": used.faults / n,
    }
    if sender is not None:
        out[f"bulk_{lab}_send_cpu_us"] = sender.cpu / n * 1e6
    if used.sampled:
        out[f"bulk_{lab}_colocated"] = used.same_cpu / used.sampled
    return out


async def run_all(driver: Any, bounds: CommBounds,
                  server_usage: Callable[[], Usage],
                  tick: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Every measurement of one configuration in one repetition."""
    out: dict[str, float] = {}
    parts = bounds.parts
    conn = await driver.connect()
    try:
        if "ping" in parts:
            out.update(await ping(driver, conn, bounds.ping_n, bounds.ping_s, server_usage))
            tick()
        if "stream" in parts:
            got = await one_way(driver, conn, 1024, bounds.stream_n, bounds.stream_s,
                                server_usage)
            out["stream_msgs"] = got.sent / got.secs
            out["stream_cpu_us"] = got.server.cpu / got.sent * 1e6
            tick()
        for size, (count, limit) in sorted(bounds.bulk.items()) if "bulk" in parts else ():
            got = await one_way(driver, conn, size, count, limit, server_usage)
            out.update(bulk_metrics(size, got.sent, got.secs, got.server, got.client))
            tick()
    finally:
        await driver.close(conn)
    if "clients" in parts:
        for k in bounds.clients:
            out[f"clients_{k}_rts"] = await concurrent(
                driver, k, bounds.ping_n, bounds.clients_s)
        tick()
    return out


def steps(bounds: CommBounds) -> int:
    """How many times :func:`run_all` ticks."""
    parts = bounds.parts
    return (("ping" in parts) + ("stream" in parts) + ("clients" in parts)
            + (len(bounds.bulk) if "bulk" in parts else 0))

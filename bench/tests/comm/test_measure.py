"""The measurement loops: warm-up before timing, counts that add up."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from asynciocomm_bench.comm import measure

MiB = 1024 * 1024


def test_warmup_messages_cover_the_byte_budget() -> None:
    assert measure.warmup_messages(128 * MiB, 8) == 2
    assert measure.warmup_messages(16 * MiB, 120) == 16
    assert measure.warmup_messages(1024, 100) == 100  # capped by the count
    assert measure.warmup_messages(1024 * MiB, 5) == 1  # at least one


class _Clock:
    """perf_counter, advanced by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_warmup_time_cap_never_cuts_below_two_messages(monkeypatch) -> None:
    """Past WARMUP_S the warm-up stops, but not before its second message (a
    receiver's buffer reuse is steady only from then), and never beyond its
    byte budget."""
    clock = _Clock()
    monkeypatch.setattr(measure.time, "perf_counter", clock)
    sent = []
    for i in measure.warmup(64 * 1024, 20_000):
        sent.append(i)
        clock.now += measure.WARMUP_S  # every message takes the whole cap
    assert sent == [0, 1]
    assert list(measure.warmup(1024 * MiB, 5)) == [0]  # the byte budget: one

    clock.now += 10 * measure.WARMUP_S
    taken = []
    for i in measure.warmup(128 * MiB, 8):
        taken.append(i)
        clock.now += 3 * measure.WARMUP_S  # a first 128 MiB message over TLS
    assert taken == [0, 1]

    sent = []
    for i in measure.warmup(64 * 1024, 20_000):  # fast: only the bytes bound it
        sent.append(i)
    assert len(sent) == measure.warmup_messages(64 * 1024, 20_000) == 4096


class CountingDriver:
    """Records what one_way sends; the server side is a counter."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.count = 0

    def message(self, size: int) -> Any:
        return size

    async def send(self, conn: Any, msg: Any) -> None:
        self.log.append("send")
        self.count += 1

    async def sync(self, conn: Any) -> int:
        self.log.append("sync")
        n, self.count = self.count, 0
        return n


def test_one_way_warms_up_then_times_only_the_rest() -> None:
    driver = CountingDriver()
    got = asyncio.run(
        measure.one_way(driver, None, 128 * MiB, 8, 10.0, lambda: measure.Usage(0.0, 0)))
    assert driver.log == ["send"] * 2 + ["sync"] + ["send"] * 8 + ["sync"]
    assert got.sent == 8 and got.secs > 0 and got.server == measure.Usage(0.0, 0)
    assert got.client.cpu >= 0


def test_server_usage_counts_only_the_timed_messages() -> None:
    """The server's CPU and page faults are the difference over the timed part:
    a server that pays 2 ms and 3 faults per message reports exactly that per
    message, warm-up excluded."""
    driver = CountingDriver()
    total = 0

    async def send(conn: Any, msg: Any) -> None:
        nonlocal total
        total += 1
        driver.count += 1

    driver.send = send  # type: ignore[method-assign]

    def usage() -> measure.Usage:
        return measure.Usage(0.002 * total, 3 * total)

    n, secs, used, client = asyncio.run(
        measure.one_way(driver, None, 128 * MiB, 8, 10.0, usage))
    assert total == 2 + 8 and n == 8
    rows = measure.bulk_metrics(128 * MiB, n, secs, used, measure.Usage(0.004 * n, 0))
    assert rows["bulk_128MiB_faults"] == 3
    assert abs(rows["bulk_128MiB_cpu_us"] - 2000) < 1e-6
    assert abs(rows["bulk_128MiB_send_cpu_us"] - 4000) < 1e-6
    assert rows["bulk_128MiB_gibs"] == 8 * 128 * MiB / secs / measure.GiB
    assert "bulk_128MiB_send_cpu_us" not in measure.bulk_metrics(128 * MiB, n, secs, used)


def _burn_until(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(10_000):
            x ^= i


def _thread_cpu(t: threading.Thread) -> float:
    assert t.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(t.ident))


def _client_cpu_while_burning(name: str) -> tuple[float, float]:
    """The client's CPU, and the thread's, while a thread called ``name`` burns
    0.1 s of CPU and the calling thread waits."""
    stop = threading.Event()
    t = threading.Thread(target=_burn_until, args=(stop,), name=name, daemon=True)
    t.start()
    try:
        start, own = measure.client_usage(), _thread_cpu(t)
        deadline = time.monotonic() + 30
        while _thread_cpu(t) - own < 0.1 and time.monotonic() < deadline:
            stop.wait(0.01)
        return measure.client_usage().since(start).cpu, _thread_cpu(t) - own
    finally:
        stop.set()
        t.join()


def test_the_clients_cpu_counts_its_threads_but_not_the_bench_housekeeping() -> None:
    """A thread that sends (the event loop, distributed's offload thread) is the
    sender's CPU; the bench's own threads (names ``bench-...``: the load
    sampler, the progress bar) are not."""
    counted, burned = _client_cpu_while_burning("Dask-Offload_0")
    assert burned >= 0.1 and counted >= 0.9 * burned
    counted, burned = _client_cpu_while_burning(measure.HOUSEKEEPING_PREFIX + "load")
    assert burned >= 0.1 and counted < 0.5 * burned

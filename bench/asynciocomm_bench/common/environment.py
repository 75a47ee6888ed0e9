"""The environment of a run: CPU, versions, and machine load while it runs."""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from importlib import metadata
from typing import Any


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, else platform.processor()."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def describe() -> dict[str, Any]:
    """Static facts about this machine and the software under test."""
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "versions": {
            name: _version(name)
            for name in ("distributed", "dask", "tornado", "uvloop", "asynciocomm",
                         "msgpack", "numpy", "py-spy")
        },
    }


def _proc_stat() -> tuple[int, int] | None:
    """(busy, total) jiffies from the aggregate cpu line of /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return total - idle, total


class LoadSampler:
    """Samples os.getloadavg and the /proc/stat busy share in a thread.

    The busy share covers all CPUs, this benchmark's own processes included;
    compare it with the share one benchmark process pair can use (2 of N).
    """

    def __init__(self, interval: float = 2.0) -> None:
        self.interval = interval
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_stat = _proc_stat()

    def _run(self) -> None:
        last = _proc_stat()
        while not self._stop.wait(self.interval):
            now = _proc_stat()
            busy = None
            if now and last and now[1] > last[1]:
                busy = (now[0] - last[0]) / (now[1] - last[1])
            last = now
            self.samples.append({"t": time.time(), "loadavg1": os.getloadavg()[0],
                                 "busy_share": -1.0 if busy is None else busy})

    def __enter__(self) -> "LoadSampler":
        self._start_stat = _proc_stat()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="bench-load")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def summary(self) -> dict[str, Any]:
        """Load averages at the end and busy share over the whole run."""
        end = _proc_stat()
        busy = None
        if end and self._start_stat and end[1] > self._start_stat[1]:
            busy = (end[0] - self._start_stat[0]) / (end[1] - self._start_stat[1])
        shares = [s["busy_share"] for s in self.samples if s["busy_share"] >= 0]
        return {
            "loadavg_end": list(os.getloadavg()),
            "busy_share_run": busy,
            "busy_share_max": max(shares) if shares else None,
            "samples": self.samples[-500:],
            "note": "busy share of all CPUs, including the benchmark's own processes",
        }

"""What the scale bench measures around one workload, and the metric names.

Before and after a workload the driver takes a :class:`Snapshot`:
- the scheduler process's CPU (user, system) and the worker processes' CPU,
  from ``/proc`` through psutil (PIDs are shared across network namespaces);
- the CPU of the scheduler's event-loop thread and the comm counts of
  :mod:`asynciocomm_bench.scale.counting`, in one ``run_on_scheduler`` call;
- with namespaces, the byte and packet counters of the scheduler host's
  interface, from ``/proc/<scheduler pid>/net/dev`` (its own namespace's view).
Differences per task are the metrics.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import psutil

#: stat -> (title, unit, higher is better, paired ratio against stock)
STATS: dict[str, tuple[str, str, bool, bool]] = {
    "sched_cpu_us": ("scheduler process CPU per task", "µs", False, True),
    "loop_cpu_us": ("scheduler event-loop thread CPU per task", "µs", False, True),
    "sched_sys_us": ("scheduler system CPU per task", "µs", False, True),
    "wall_s": ("wall time", "s", False, True),
    "tps": ("throughput", "tasks/s", True, True),
    "workers_cpu_us": ("worker processes' CPU per task", "µs", False, True),
    "reads": ("comm reads per task", "", False, False),
    "read_msgs": ("messages read per task", "", False, False),
    "writes": ("comm writes per task", "", False, False),
    "write_msgs": ("messages written per task", "", False, False),
    "write_bytes": ("bytes written per task (comm)", "B", False, False),
    "wire_rx_bytes": ("bytes received per task (interface)", "B", False, False),
    "wire_tx_bytes": ("bytes sent per task (interface)", "B", False, False),
    "wire_rx_pkts": ("packets received per task (interface)", "", False, False),
    "wire_tx_pkts": ("packets sent per task (interface)", "", False, False),
    # the scheduler's garbage collector during the map (asynciocomm_bench.gc.probe, timing mode)
    "gc_cpu_us": ("scheduler GC CPU per task", "µs", False, True),
    "gc_full": ("full collections per 1,000 tasks", "", False, False),
    "gc_pause_ms": ("longest GC pause", "ms", False, False),
    "gc_freed": ("objects the collector freed per task", "", False, False),
}
#: How the report names each workload.
WORKLOAD_TITLES = {"map": "short tasks", "graph": "large graph"}
COUNT_KEYS = ("reads", "read_msgs", "writes", "write_msgs", "write_bytes")
WIRE_KEYS = ("wire_rx_bytes", "wire_rx_pkts", "wire_tx_bytes", "wire_tx_pkts")


def metric_name(workload: str, workers: int, stat: str) -> str:
    """The metric key of one statistic, e.g. ``map_w64_sched_cpu_us``."""
    return f"{workload}_w{workers}_{stat}"


def metrics_for(workloads: list[str], workers: list[int]) -> dict[str, dict[str, Any]]:
    """Metadata of every metric of a run."""
    out: dict[str, dict[str, Any]] = {}
    for wl in workloads:
        for w in workers:
            for stat, (title, unit, higher, ratio) in STATS.items():
                out[metric_name(wl, w, stat)] = {
                    "title": f"scale, {w} workers, {WORKLOAD_TITLES.get(wl, wl)}: {title}",
                    "unit": unit,
                    "higher_is_better": higher, "ratio": ratio}
    return out


def net_dev(pid: int, iface: str = "eth0") -> dict[str, int] | None:
    """Byte and packet counters of ``iface`` in the namespace of ``pid``."""
    try:
        with open(f"/proc/{pid}/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == iface:
                    v = [int(x) for x in rest.split()]
                    return {"wire_rx_bytes": v[0], "wire_rx_pkts": v[1],
                            "wire_tx_bytes": v[8], "wire_tx_pkts": v[9]}
    except OSError:
        return None
    return None


def probe() -> dict[str, float]:
    """Run on the scheduler's event loop: its thread CPU and the comm counts."""
    from asynciocomm_bench.scale import counting

    return {"loop_cpu": time.thread_time(), **counting.snapshot()}


def _cpu(pid: int) -> tuple[float, float]:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0, 0.0
    return t.user, t.system


@dataclasses.dataclass
class Snapshot:
    """Counters at one instant."""

    t: float
    sched_user: float
    sched_sys: float
    workers: float
    sched: dict[str, float]
    wire: dict[str, int] | None

    def per_task(self, before: "Snapshot", ntasks: int) -> dict[str, float]:
        """The metrics of the interval ``before`` -> self, per task."""
        wall = self.t - before.t
        cpu = (self.sched_user + self.sched_sys) - (before.sched_user + before.sched_sys)
        out = {
            "wall_s": wall, "tps": ntasks / wall,
            "sched_cpu_us": cpu / ntasks * 1e6,
            "sched_sys_us": (self.sched_sys - before.sched_sys) / ntasks * 1e6,
            "loop_cpu_us": (self.sched["loop_cpu"] - before.sched["loop_cpu"]) / ntasks * 1e6,
            "workers_cpu_us": (self.workers - before.workers) / ntasks * 1e6,
        }
        for k in COUNT_KEYS:
            out[k] = (self.sched[k] - before.sched[k]) / ntasks
        if self.wire is not None and before.wire is not None:
            for k in WIRE_KEYS:
                out[k] = (self.wire[k] - before.wire[k]) / ntasks
        return out


async def snapshot(client: Any, sched_pid: int, worker_pids: list[int],
                   wire: bool, *, before: bool) -> Snapshot:
    """Take a snapshot. The calls are ordered so that the measured interval is
    as short as the workload: before it, the scheduler round trip comes first
    and the clock last; after it, the reverse."""
    sched: dict[str, float] = {}
    if before:
        sched = await client.run_on_scheduler(probe)
        counters = net_dev(sched_pid) if wire else None
        workers = sum(sum(_cpu(p)) for p in worker_pids)
        user, sys_ = _cpu(sched_pid)
        t = time.perf_counter()
    else:
        t = time.perf_counter()
        user, sys_ = _cpu(sched_pid)
        workers = sum(sum(_cpu(p)) for p in worker_pids)
        counters = net_dev(sched_pid) if wire else None
        sched = await client.run_on_scheduler(probe)
    return Snapshot(t, user, sys_, workers, sched, counters)

"""The client of one scale cluster: it runs the workloads and measures them.

It runs on a host of its own (the client namespace), as a user's client would:

    python -m asynciocomm_bench.scale.driver SPEC.json OUT.json

The spec names the scheduler file, the PIDs to measure, the number of workers
to wait for, the workload sizes and, optionally, a workload to run once more
under ``py-spy record`` (attached to the scheduler by PID). The result file
holds the metrics of each workload (:mod:`asynciocomm_bench.scale.metrics`), the event-loop
classes of the processes, and the profiled run's metrics.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from asynciocomm_bench.gc import metrics as gc_metrics
from asynciocomm_bench.gc import probe as gc_probe
from asynciocomm_bench.gc import suite as gc_suite
from asynciocomm_bench.scale import graphs, metrics
from asynciocomm_bench.scale.lifeline import die_with_parent

#: Tasks of the warm-up map before the first measured workload.
WARMUP_TASKS = 500
#: Polls (every 50 ms) for the scheduler to forget a workload's tasks.
FORGET_POLLS = 400


def _ntasks(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


def _loop_class() -> str:
    cls = type(asyncio.get_running_loop())
    return f"{cls.__module__}.{cls.__qualname__}"


async def forget(client: Any) -> None:
    """Wait (bounded) until the scheduler holds no task."""
    for _ in range(FORGET_POLLS):
        if not await client.run_on_scheduler(_ntasks):
            return
        await asyncio.sleep(0.05)


async def run_once(client: Any, spec: dict[str, Any], name: str,
                   sizes: graphs.Sizes) -> dict[str, float]:
    """Run workload ``name`` once; its metrics per task. Raises on a wrong result."""
    await client.run_on_scheduler(gc.collect)
    pids, wire = spec["worker_pids"], spec["wire"]
    timeout = spec["timeout_s"]
    collector: dict[str, Any] | None = None
    if name == "map":
        await client.run_on_scheduler(gc_probe.start)
        before = await metrics.snapshot(client, spec["scheduler_pid"], pids, wire,
                                        before=True)
        futures = await asyncio.wait_for(graphs.submit_map(client, sizes.map), timeout)
        after = await metrics.snapshot(client, spec["scheduler_pid"], pids, wire,
                                       before=False)
        collector = await client.run_on_scheduler(gc_probe.stop)
        ntasks = len(futures)
        await graphs.check_map(client, futures)
        del futures
    else:
        wl = graphs.graph(name, sizes)
        before = await metrics.snapshot(client, spec["scheduler_pid"], pids, wire,
                                        before=True)
        result = await asyncio.wait_for(client.get(wl.dsk, wl.key, sync=False), timeout)
        after = await metrics.snapshot(client, spec["scheduler_pid"], pids, wire,
                                       before=False)
        ntasks = wl.ntasks
        if result != wl.expected:
            raise RuntimeError(f"{name}: result {result} != expected {wl.expected}")
    await forget(client)
    values = after.per_task(before, ntasks)
    if collector is not None:
        values.update(gc_metrics.scale_values(collector, ntasks))
    return values


async def profiled(client: Any, spec: dict[str, Any], sizes: graphs.Sizes) -> dict[str, Any]:
    """Run the profile workload once more, under py-spy on the scheduler."""
    from asynciocomm_bench.profile.suite import PySpy

    prof = spec["profile"]
    out = Path(prof["output"])
    spy = PySpy(spec["scheduler_pid"], out, rate=prof.get("rate", 100),
                max_s=spec["timeout_s"] + 30, native=prof.get("native", True))
    try:
        values = await run_once(client, spec, prof["workload"], sizes)
    finally:
        spy.stop()
    return {"workload": prof["workload"], "speedscope": str(out), "values": values}


async def drive(spec: dict[str, Any]) -> dict[str, Any]:
    """Connect, wait for the workers, run every workload, and the profile."""
    from distributed import Client
    from distributed.security import Security

    sizes = graphs.Sizes(**spec["sizes"])
    security = Security() if spec["tls"] else None
    client = await Client(scheduler_file=spec["scheduler_file"], asynchronous=True,
                          security=security, timeout=spec["start_timeout_s"])
    out: dict[str, Any] = {"values": {}, "errors": []}
    try:
        await asyncio.wait_for(client.wait_for_workers(spec["workers"]),
                               spec["start_timeout_s"])
        out["loop_classes"] = {
            "scheduler": await client.run_on_scheduler(_loop_class),
            "workers": sorted(set((await client.run(_loop_class)).values())),
            "client": _loop_class()}
        await graphs.check_map(client, await graphs.submit_map(client, WARMUP_TASKS))
        await forget(client)
        for name in spec["workloads"]:
            try:
                out["values"][name] = await run_once(client, spec, name, sizes)
            except Exception as exc:
                out["errors"].append({"workload": name,
                                      "error": f"{type(exc).__name__}: {exc}",
                                      "traceback": traceback.format_exc(limit=8)})
                await forget(client)
        if spec.get("gc_attribution"):
            # one more map, with the collector's garbage attributed (asynciocomm_bench.gc)
            out["gc_attribution"] = await gc_suite.measure(
                client, sizes.map, spec["timeout_s"], attribution=True)
        if spec.get("profile"):
            out["profile"] = await profiled(client, spec, sizes)
    finally:
        await client.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point: read the spec, drive on distributed's configured loop, write."""
    die_with_parent()
    argv = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(argv[0]).read_text())
    from distributed.compatibility import asyncio_run
    from distributed.config import get_loop_factory

    try:
        out = asyncio_run(drive(spec), loop_factory=get_loop_factory())
    except BaseException as exc:
        out = {"values": {}, "errors": [{"workload": None,
                                         "error": f"{type(exc).__name__}: {exc}",
                                         "traceback": traceback.format_exc(limit=8)}]}
    Path(argv[1]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

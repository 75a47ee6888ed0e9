"""Cluster faults on ``asyncio`` and on stock ``tcp``: a worker process SIGKILLed
mid-computation, and a nanny restart. The computation finishes with the right
result and the scheduler's state recovers (workers back, no task left)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from distributed import Client, LocalCluster

pytestmark = pytest.mark.slow


def _slow_inc(x: int) -> int:
    time.sleep(0.05)
    return x + 1


@pytest.mark.parametrize("protocol", ["asyncio", "tcp"])
def test_worker_killed_and_nanny_restart(protocol: str) -> None:
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol=protocol,
                      dashboard_address=":0", worker_dashboard_address=":0") as cluster:
        with Client(cluster, timeout=30) as client:
            client.wait_for_workers(2, timeout=30)
            pids = client.run(os.getpid)
            assert len(pids) == 2
            futures = client.map(_slow_inc, range(120), pure=False)
            total = client.submit(sum, futures)
            # kill one worker once the work is under way
            deadline = time.monotonic() + 30
            while sum(f.done() for f in futures) < 10 and time.monotonic() < deadline:
                time.sleep(0.05)
            victim_addr, victim_pid = next(iter(pids.items()))
            os.kill(victim_pid, signal.SIGKILL)  # a process of this test's cluster
            assert total.result(timeout=60) == sum(range(1, 121))
            client.wait_for_workers(2, timeout=30)
            info = client.scheduler_info()
            assert len(info["workers"]) == 2
            assert victim_pid not in client.run(os.getpid).values()

            # a nanny restart of one worker
            addr = next(iter(client.scheduler_info()["workers"]))
            client.restart_workers([addr], timeout=60)
            client.wait_for_workers(2, timeout=30)
            assert client.submit(sum, client.map(_slow_inc, range(40), pure=False)).result(
                timeout=60) == sum(range(1, 41))
            del futures, total
            # no task stuck on the scheduler once the client let go of everything
            deadline = time.monotonic() + 20
            left = -1
            while time.monotonic() < deadline:
                left = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
                if left == 0:
                    break
                time.sleep(0.1)
            assert left == 0
            assert len(client.scheduler_info()["workers"]) == 2

"""A local cluster of ``dask scheduler`` / ``dask worker`` subprocesses.

Settings reach the subprocesses through a temporary dask config directory
(``DASK_CONFIG``): the event loop, ``worker-saturation: inf`` and, for TLS
schemes, the throwaway certificates. Every process is stopped by PID.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dask.config
import yaml

from asynciocomm_bench.common.processes import ProcessGroup, stop_processes
from asynciocomm_bench.common.tlsfiles import TLSFiles


def dask_config(loop: str, tls: TLSFiles | None) -> dict[str, Any]:
    """The dask config every process of the cluster gets."""
    cfg: dict[str, Any] = {
        "distributed": {
            "admin": {"event-loop": loop},
            "scheduler": {"worker-saturation": float("inf")},
        },
        "logging": {"distributed": "error"},
    }
    if tls is not None:
        cfg = dask.config.merge(cfg, tls.dask_config())
    return cfg


class LocalCluster(ProcessGroup):
    """Scheduler + workers as subprocesses on ``scheme`` with ``loop``."""

    def __init__(self, scheme: str, loop: str, workers: int, threads: int,
                 workdir: str | Path, tls: TLSFiles | None = None,
                 start_timeout: float = 60.0) -> None:
        super().__init__(workdir)
        self.scheme, self.loop = scheme, loop
        confdir = self.workdir / "dask-config"
        confdir.mkdir(exist_ok=True)
        (confdir / "bench.yaml").write_text(yaml.safe_dump(dask_config(loop, tls)))
        self.env = {**os.environ, "DASK_CONFIG": str(confdir),
                    "DASK_DISTRIBUTED__ADMIN__EVENT_LOOP": loop,
                    "PYTHONUNBUFFERED": "1"}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.address = ""
        try:
            self._start(workers, threads, start_timeout)
        except BaseException:
            self.stop()
            raise

    def _popen(self, args: list[str], name: str) -> subprocess.Popen[bytes]:
        log = self.open_log(name)
        proc = subprocess.Popen([sys.executable, "-m", *args], stdout=log,
                                stderr=subprocess.STDOUT, env=self.env,
                                cwd=self.workdir)
        self.procs.append(proc)
        return proc

    def _start(self, workers: int, threads: int, timeout: float) -> None:
        sfile = self.workdir / "scheduler.json"
        if sfile.exists():
            sfile.unlink()
        self.scheduler = self._popen(
            ["distributed.cli.dask_scheduler", "--protocol", self.scheme,
             "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(sfile)], "scheduler")
        self.address = self.wait_scheduler_file(sfile, self.scheduler, timeout)
        for i in range(workers):
            self._popen(["distributed.cli.dask_worker", self.address, "--no-nanny",
                         "--nthreads", str(threads), "--memory-limit", "0",
                         "--no-dashboard", "--host", "127.0.0.1", "--name", f"w{i}",
                         "--local-directory", str(self.workdir)], f"worker{i}")

    @property
    def scheduler_pid(self) -> int:
        return self.scheduler.pid

    def stop(self) -> None:
        """Terminate every process this cluster started, by PID, the workers before
        the scheduler; kill stragglers. A worker terminated together with its
        scheduler may hang in its reconnect until killed (here one in three, 10 s
        each); the workers first, then the scheduler, end in about 0.5 s."""
        stop_processes(self.procs[1:])
        stop_processes(self.procs[:1])
        self.close_logs()

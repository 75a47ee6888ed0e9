"""A scale cluster: one scheduler and H worker processes, each on its own host.

A host is a network namespace (:mod:`asynciocomm_bench.scale.netns`) or, in the loopback
fallback, the root namespace. Processes start through ``ip netns exec`` with
this venv's Python, with a per-host dask config file (``DASK_CONFIG``) that
holds the event loop, quiet logging and, for TLS schemes, that host's own
certificate; the loop is also in ``DASK_DISTRIBUTED__ADMIN__EVENT_LOOP``.
Every process is stopped by its PID, and dies with the bench if it is killed.
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
from asynciocomm_bench.common.tlsfiles import HostTLS
from asynciocomm_bench.scale.netns import Host

#: Seconds between SIGTERM and SIGKILL when a cluster stops.
STOP_GRACE_S = 15.0
SCHEDULER_PORT = 8786
#: Settings of the worker hosts only. Packed by the dozen into one process on
#: two cores, each worker's own monitoring would take the cores the scheduler
#: needs: at 256 idle workers their 20 ms loop tick, 10 ms statistical profiler
#: and 500 ms system monitor took 0.84 cores (0.13 with these). None of them
#: sends anything to the scheduler (heartbeats keep their rate), so the
#: scheduler's work is unchanged; the scheduler and the client keep every default.
WORKER_HOST_CONFIG: dict[str, Any] = {"distributed": {
    "admin": {"tick": {"interval": "500ms"},
              "system-monitor": {"interval": "5s", "disk": False}},
    "worker": {"profile": {"enabled": False}},
}}


def host_config(loop: str, tls: HostTLS | None, host: str,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The dask config of one host's processes."""
    cfg: dict[str, Any] = {"distributed": {"admin": {"event-loop": loop}},
                           "logging": {"distributed": "error"}}
    if tls is not None:
        cfg = dask.config.merge(cfg, tls.dask_config(host))
    return dask.config.merge(cfg, extra or {})


def split_workers(total: int, nprocs: int) -> list[int]:
    """``total`` workers over ``nprocs`` processes, as evenly as possible."""
    nprocs = max(1, min(nprocs, total))
    return [total // nprocs + (1 if i < total % nprocs else 0) for i in range(nprocs)]


class ScaleCluster(ProcessGroup):
    """Scheduler on ``hosts["s"]``, worker processes on ``hosts["h0"]``...

    ``workers`` is the total number of ``Worker``s, spread over as many
    worker hosts as ``hosts`` has (``h0``, ``h1``, ...).
    """

    def __init__(self, scheme: str, loop: str, workers: int, hosts: dict[str, Host],
                 workdir: Path, tls: HostTLS | None = None,
                 config: dict[str, Any] | None = None, start_timeout: float = 60.0,
                 listen_host: dict[str, str | None] | None = None,
                 worker_args: tuple[str, ...] = (),
                 pythonpath: dict[str, str] | None = None) -> None:
        super().__init__(workdir)
        self.scheme, self.loop, self.workers = scheme, loop, workers
        self.hosts, self.tls, self.config = hosts, tls, config or {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.worker_hosts = sorted((h for h in hosts if h.startswith("h")),
                                   key=lambda h: int(h[1:]))
        self.per_host = split_workers(workers, len(self.worker_hosts))
        self.worker_hosts = self.worker_hosts[:len(self.per_host)]
        # None listens on every interface (the multi-homed check); else the host's address
        self.listen_host = listen_host or {}
        self.worker_args = list(worker_args)
        # a directory put first on a host's PYTHONPATH (a patched distributed)
        self.pythonpath = pythonpath or {}
        self.address = ""
        try:
            self._start(start_timeout)
        except BaseException:
            self.stop()
            raise

    def env(self, host: str) -> dict[str, str]:
        """The environment of a process on ``host``."""
        confdir = self.workdir / "config" / host
        confdir.mkdir(parents=True, exist_ok=True)
        cfg = host_config(self.loop, self.tls, host, self.config)
        if host.startswith("h"):
            cfg = dask.config.merge(cfg, WORKER_HOST_CONFIG)
        (confdir / "dask.yaml").write_text(yaml.safe_dump(cfg))
        pypath = os.pathsep.join(p for p in (self.pythonpath.get(host),
                                             os.environ.get("PYTHONPATH")) if p)
        return {**os.environ, "DASK_CONFIG": str(confdir), "PYTHONPATH": pypath,
                "DASK_DISTRIBUTED__ADMIN__EVENT_LOOP": self.loop,
                "PYTHONUNBUFFERED": "1"}

    def spawn(self, host: str, name: str, args: list[str],
              stdout: Any = None) -> subprocess.Popen[bytes]:
        """Start ``python ARGS`` on ``host``; its output goes to ``NAME.log``."""
        log = self.open_log(name)
        argv = [*self.hosts[host].exec_prefix(), sys.executable, *args]
        proc = subprocess.Popen(argv, stdout=stdout or log, stderr=log,
                                env=self.env(host), cwd=self.workdir)
        self.procs[name] = proc
        return proc

    def _start(self, timeout: float) -> None:
        sfile = self.workdir / "scheduler.json"
        sfile.unlink(missing_ok=True)
        shost = self.hosts["s"]
        port = "0" if shost.netns is None else str(SCHEDULER_PORT)
        self.scheduler = self.spawn("s", "scheduler", [
            "-m", "distributed.cli.dask_scheduler", "--protocol", self.scheme,
            "--host", shost.address, "--port", port, "--no-dashboard",
            "--scheduler-file", str(sfile), "--preload", "asynciocomm_bench.scale.counting"])
        self.address = self.wait_scheduler_file(sfile, self.scheduler, timeout)
        self.scheduler_file = sfile
        for host, n in zip(self.worker_hosts, self.per_host):
            listen = self.listen_host.get(host, self.hosts[host].address)
            args = ["-m", "asynciocomm_bench.scale.workerproc", self.address, "--workers", str(n),
                    "--protocol", self.scheme, "--name", f"{host}-",
                    "--local-directory", str(self.workdir / "workers"), *self.worker_args]
            if listen is not None:
                args += ["--host", listen]
            self.spawn(host, f"workers-{host}", args)

    @property
    def scheduler_pid(self) -> int:
        """The scheduler's PID (the same in every namespace: PIDs are shared)."""
        return self.scheduler.pid

    @property
    def worker_pids(self) -> list[int]:
        """PIDs of the worker processes."""
        return [p.pid for n, p in self.procs.items() if n.startswith("workers-")]

    def check_alive(self) -> None:
        """Raise if a process of the cluster has exited."""
        for name, proc in self.procs.items():
            if proc.poll() is not None and not name.startswith("driver"):
                raise RuntimeError(f"{name} exited ({proc.returncode}): {self.log_tail(name)}")

    def stop(self) -> None:
        """SIGTERM every process by PID, the scheduler last (so that workers
        close while it listens); SIGKILL stragglers."""
        sched = self.procs.get("scheduler")
        stop_processes([p for p in self.procs.values() if p is not sched], STOP_GRACE_S)
        if sched is not None:
            stop_processes([sched], STOP_GRACE_S)
        self.close_logs()

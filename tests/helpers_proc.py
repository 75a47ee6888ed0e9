"""Subprocesses for the CLI and cluster tests: ``dask scheduler`` / ``dask worker``.

Every process is started in its own session and stopped by its own process group
id (never by name: other dask processes on the machine are not ours). Output goes
to files so that a failure can show it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from tests.conftest import loop_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START_TIMEOUT = 90  # a scheduler imports distributed and numpy on a busy 2-core box


class Proc:
    def __init__(self, args: list[str], log: str, env: dict[str, str]) -> None:
        self.args = args
        self.log = log
        self._out = open(log, "wb")
        self.popen = subprocess.Popen(
            args, stdout=self._out, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            start_new_session=True,
        )  # fmt: skip

    def output(self) -> str:
        self._out.flush()
        with open(self.log, errors="replace") as f:
            return f.read()[-8000:]

    def stop(self) -> None:
        """SIGTERM to our process group (lets a nanny stop its worker), then SIGKILL."""
        p = self.popen
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        # Children (a nanny's worker) share the group; make sure none survive.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=20)
        self._out.close()


def dask_env(loop_name: str | None, **extra: str) -> dict[str, str]:
    env = loop_env(loop_name)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@contextlib.contextmanager
def dask_processes() -> Iterator[list[Proc]]:
    procs: list[Proc] = []
    try:
        yield procs
    finally:
        for p in reversed(procs):
            p.stop()


def start_scheduler(
    procs: list[Proc], tmp_path, loop_name: str | None, *args: str, env: dict | None = None
) -> str:
    """Start ``dask scheduler`` and return its address (from --scheduler-file)."""
    sched_file = str(tmp_path / f"scheduler-{len(procs)}.json")
    cmd = [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
           "--no-dashboard", "--scheduler-file", sched_file, *args]  # fmt: skip
    proc = Proc(cmd, str(tmp_path / f"scheduler-{len(procs)}.log"), env or dask_env(loop_name))
    procs.append(proc)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise AssertionError(f"scheduler exited:\n{proc.output()}")
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
            with open(sched_file) as f:
                return json.load(f)["address"]
        time.sleep(0.1)
    raise AssertionError(f"scheduler did not start:\n{proc.output()}")


def start_worker(
    procs: list[Proc], tmp_path, loop_name: str | None, address: str, *args: str,
    env: dict | None = None,
) -> Proc:
    cmd = [sys.executable, "-m", "dask", "worker", address, "--nthreads", "1",
           "--no-dashboard", "--host", "127.0.0.1", *args]  # fmt: skip
    proc = Proc(cmd, str(tmp_path / f"worker-{len(procs)}.log"), env or dask_env(loop_name))
    procs.append(proc)
    return proc


def logs(procs: list[Proc]) -> str:
    return "\n".join(f"--- {' '.join(p.args[2:5])}\n{p.output()}" for p in procs)

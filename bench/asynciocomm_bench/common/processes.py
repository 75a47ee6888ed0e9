"""Subprocesses of a bench run: their log tails, and stopping them by PID."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO


def log_tail(path: str | Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file ("" if it cannot be read)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def stop_processes(procs: Iterable[subprocess.Popen[bytes]], grace_s: float = 10.0) -> None:
    """SIGTERM each running process (by its PID), wait up to ``grace_s`` for all
    of them, then SIGKILL the stragglers."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class ProcessGroup:
    """Subprocesses of one run that log to ``workdir/NAME.log``; as a context
    manager it calls ``stop()``, which a subclass defines (by PID)."""

    def __init__(self, workdir: str | Path) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._logs: list[IO[bytes]] = []

    def open_log(self, name: str) -> IO[bytes]:
        """A fresh ``NAME.log``, closed by :meth:`close_logs`."""
        log = open(self.workdir / f"{name}.log", "wb")
        self._logs.append(log)
        return log

    def log_tail(self, name: str, lines: int = 15) -> str:
        """The last lines of a process's log (scheduler, worker0, ...)."""
        return log_tail(self.workdir / f"{name}.log", lines)

    def close_logs(self) -> None:
        """Close every log file opened."""
        for log in self._logs:
            log.close()
        self._logs = []

    def wait_scheduler_file(self, path: Path, scheduler: subprocess.Popen[bytes],
                            timeout: float) -> str:
        """The address in a ``--scheduler-file`` once it is written (bounded)."""
        deadline = time.monotonic() + timeout
        while not path.exists() or not path.read_text().strip():
            if scheduler.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"scheduler did not start: {self.log_tail('scheduler')}")
            time.sleep(0.05)
        time.sleep(0.05)
        address: str = json.loads(path.read_text())["address"]
        return address

    def stop(self) -> None:
        """Stop every process (subclasses know their processes)."""
        raise NotImplementedError

    def __enter__(self) -> "ProcessGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

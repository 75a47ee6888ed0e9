"""A ``asynciocomm_bench.comm.server`` subprocess, stopped by PID in ``finally``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from asynciocomm_bench.comm.measure import Usage


class ServerProcess:
    """A fresh server process for one configuration of ``comm``."""

    def __init__(self, spec: dict[str, Any], start_timeout: float = 60.0) -> None:
        self.spec = spec
        self._log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "asynciocomm_bench.comm.server", json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True, bufsize=1, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            self.info = self._readline(start_timeout)
        except BaseException:
            self.stop()
            raise
        self.address: str = self.info["address"]
        self.loop_class: str | None = self.info.get("loop_class")

    def _readline(self, timeout: float) -> dict[str, Any]:
        import selectors

        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            if not sel.select(timeout):
                raise RuntimeError(f"server {self.spec} did not answer: {self.stderr()}")
        finally:
            sel.close()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"server {self.spec} exited: {self.stderr()}")
        return json.loads(line)

    def stderr(self) -> str:
        """The last lines the server wrote to stderr."""
        self._log.seek(0)
        return "".join(self._log.readlines()[-15:])

    def usage(self) -> Usage:
        """RUSAGE_SELF user+system seconds and minor page faults of the server
        process, and the CPU of its event-loop thread."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("rusage\n")
        self.proc.stdin.flush()
        got = self._readline(30)
        return Usage(float(got["cpu"]), int(got["minflt"]), float(got.get("loop_cpu", 0.0)))

    def stop(self) -> None:
        """Ask the process to stop; kill it by PID if it does not."""
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        deadline = time.monotonic() + 10
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if not self._log.closed:
            self._log.close()

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

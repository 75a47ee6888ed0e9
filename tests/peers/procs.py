"""Processes of the reliability scenarios and what can be read of them:
descriptor counts and memory from ``/proc``, and the handles of the
subprocesses -- :class:`ListenerProcess` (``tests.peers.server``)
and :class:`PeerProcess` (``tests.peers.peer``, killed for the
SIGKILL faults).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from tests.peers.conn import TLSSpec

#: The checkout's root, where ``tests`` is importable from.
ROOT = str(Path(__file__).resolve().parents[2])


def _spawn(module: str, spec: dict[str, Any], loop: str,
           stdin: bool) -> tuple[subprocess.Popen[str], IO[str]]:
    """``python -m module '<json spec>'`` on event loop ``loop``, stdout piped.
    stderr goes to a temporary file, returned too: a pipe nobody drains would
    block the child's logging."""
    # The peers are modules of the checkout's tests package, not installed: the
    # child finds them from the checkout's root, wherever it is started.
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path,
           "DASK_DISTRIBUTED__ADMIN__EVENT_LOOP": loop}
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", module, json.dumps(spec)],
        stdin=subprocess.PIPE if stdin else None, stdout=subprocess.PIPE,
        stderr=log, text=True, env=env,
    )
    return proc, log


# -- resources -------------------------------------------------------------------------


def fd_count(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmPeak, VmSize, VmHWM, VmRSS of a process, in bytes."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmPeak", "VmSize", "VmHWM", "VmRSS"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def reset_peak_rss(pid: int | str = "self") -> bool:
    """Reset VmHWM (Linux >= 4.0: write 5 to clear_refs). False if not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# -- a listener in its own process ----------------------------------------------------


class ListenerProcess:
    """``python -m tests.peers.server``: a listener (echo + soak handler) in its own
    process, so that its memory and descriptors can be read from ``/proc``.
    Stopped by its PID."""

    def __init__(
        self, scheme: str, loop: str, tls: TLSSpec | None = None,
        config: dict[str, Any] | None = None, start_timeout: float = 60.0,
    ) -> None:
        spec = {"scheme": scheme, "loop": loop, "config": config or {},
                "tls": tls.__dict__ if tls else None}
        self.proc, self._log = _spawn("tests.peers.server", spec, loop, stdin=True)
        self.pid = self.proc.pid
        try:
            line = self._readline(start_timeout)
            info = json.loads(line)
        except BaseException:
            self.stop()
            raise
        self.address: str = info["address"]

    def _readline(self, timeout: float) -> str:
        import selectors

        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise RuntimeError("listener process did not start in time")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"listener process exited: {self.stderr()}")
        return line

    def status(self) -> dict[str, int]:
        return proc_status(self.pid)

    def fds(self) -> int:
        return fd_count(self.pid)

    def reset_peak(self) -> bool:
        return reset_peak_rss(self.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        """What the server logged so far (the last 8000 characters)."""
        if self._log.closed:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read()[-8000:]

    def stop(self) -> str:
        """Stop the process (by PID) and return the tail of its stderr."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(10)
        out = self.stderr()
        for f in (self.proc.stdin, self.proc.stdout, self._log):
            if f is not None and not f.closed:
                f.close()
        return out

    def __enter__(self) -> ListenerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# -- a peer process (SIGKILL faults) --------------------------------------------------


class PeerProcess:
    """``python -m tests.peers.peer``: connects to ``address`` and writes large
    messages in a loop (``mode='write'``) or reads slowly (``mode='read'``).
    Prints one line once connected. Killed by its PID."""

    def __init__(self, mode: str, address: str, loop: str, tls: TLSSpec | None = None,
                 size: int = 32 << 20) -> None:
        spec = {"mode": mode, "address": address, "size": size,
                "tls": tls.__dict__ if tls else None}
        self.proc, self._log = _spawn("tests.peers.peer", spec, loop, stdin=False)
        self.pid = self.proc.pid

    async def wait_ready(self, timeout: float = 60.0) -> str:
        loop = asyncio.get_running_loop()
        assert self.proc.stdout is not None
        readline = self.proc.stdout.readline
        line = await asyncio.wait_for(loop.run_in_executor(None, readline), timeout)
        if not line:
            self._log.seek(0)
            raise RuntimeError(f"peer process exited: {self._log.read()[-4000:]}")
        return line.strip()

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        for f in (self.proc.stdout, self._log):
            if f is not None and not f.closed:
                f.close()

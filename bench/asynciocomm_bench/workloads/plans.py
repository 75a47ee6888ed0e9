"""Running plans of :mod:`asynciocomm_bench.workloads.driver` in subprocesses, and recovering.

A plan is run by one driver process. Its results come back one line at a time;
if the process ends before all of them (a run outlived its time and the driver
ended itself, or it crashed), every process left in its session is stopped and
a new driver runs the rest of the plan, the missing run counted as failed.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from asynciocomm_bench.workloads.driver import RESULT_TAG

#: Seconds a driver may be silent beyond a run's own timeout (its cluster's
#: start and close, the warm-up) before it is stopped from here.
GRACE_S = 120.0


def _lines(stream: IO[str], out: "queue.Queue[str | None]") -> None:
    for line in stream:
        out.put(line)
    out.put(None)


def _stop_session(proc: subprocess.Popen[str]) -> None:
    """End the driver and everything it started (its session, by its id) and reap
    it. The group is signalled while the driver is unreaped, so that its id
    cannot have been given to another process."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(30)


def _wait_unreaped(proc: subprocess.Popen[str], timeout: float) -> None:
    """Wait for the driver to exit without reaping it (it stays a zombie)."""
    done = threading.Event()

    def wait() -> None:
        try:
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    done.wait(timeout)


def _drive(plan: dict[str, Any], log: IO[bytes]) -> Iterator[dict[str, Any]]:
    """Start one driver on ``plan`` and yield its results as they come."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="workloads-plan-",
                                     delete=False) as f:
        json.dump(plan, f)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DASK_LOGGING__DISTRIBUTED": "error"}
    proc = subprocess.Popen([sys.executable, "-m", "asynciocomm_bench.workloads.driver", f.name],
                            stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                            start_new_session=True)
    lines: queue.Queue[str | None] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        while True:
            try:
                line = lines.get(timeout=plan["timeout_s"] + GRACE_S)
            except queue.Empty:
                return
            if line is None:
                return
            if line.startswith(RESULT_TAG):
                yield json.loads(line[len(RESULT_TAG):])
    finally:
        _wait_unreaped(proc, 10)
        _stop_session(proc)
        Path(f.name).unlink(missing_ok=True)


def run_plan(plan: dict[str, Any], log_path: Path,
             on_result: Callable[[dict[str, Any]], None] = lambda r: None) -> list[dict[str, Any]]:
    """Every run of ``plan`` (each run dict has a unique ``index``), in order; a
    run that got no result is reported with an ``error``."""
    todo = list(plan["runs"])
    got: dict[int, dict[str, Any]] = {}
    with open(log_path, "ab") as log:
        for _ in range(len(todo)):
            if not todo:
                break
            for row in _drive({**plan, "runs": todo}, log):
                got[row["index"]] = row
                on_result(row)
            todo = [r for r in todo if r["index"] not in got]
            if todo:  # the driver ended early: its next run failed
                lost = {**todo[0], "error": "the driver process ended without a result "
                                            f"(see {log_path.name})"}
                got[lost["index"]] = lost
                on_result(lost)
                todo = todo[1:]
    return [got[r["index"]] for r in plan["runs"]]

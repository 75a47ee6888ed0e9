"""One run of distributed's own test modules with one comm on one event loop: its
pytest processes, their environment, and each test's outcome.

A run is a fresh pytest process per (comm, event loop): distributed's harness
reads the event loop from the configuration taken at import, and the takeover
must be in place before the first comm is made. The process starts in a
directory of its own (not the source tree, whose ``distributed`` package would
shadow the installed one on ``sys.path``), imports the test modules in
``importlib`` mode for the same reason, and writes no bytecode or cache into the
source tree.

Each test's outcome comes from the plugin's event lines as it finishes. A test
that outlives ``test_timeout`` by the watchdog's grace (pytest-timeout cannot
interrupt a uvloop loop blocked in C) is *hung*: its process group is stopped and
a new process runs the tests not run yet. A process that dies in a test makes it
*crashed*, and the run goes on the same way. The run as a whole is bounded by
``run_timeout``; what it did not reach is *missing*.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: The comms of a run: the stock comm serves tcp:// and tls://, or asynciocomm does.
COMMS = ("stock", "takeover")
#: The nodes whose ``preload`` setting carries the takeover into processes the
#: tests start (a nanny's worker, a client or scheduler in a subprocess).
PRELOAD_NODES = ("SCHEDULER", "WORKER", "NANNY", "CLIENT")
#: Seconds a stopped process group gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 10.0
#: How often the watchdog reads the events (seconds).
POLL_S = 0.5
#: Processes a run may start: the first, and one after each hung or crashed test.
MAX_PROCESSES = 50
#: Why the watchdog stopped a process when the run's time, not a test's, was up.
TIME_UP = "the run's time was up"


def watchdog_grace(test_timeout: float) -> float:
    """Seconds past ``test_timeout`` before the watchdog stops a test: enough for
    pytest-timeout to fail it first where it can (then the process goes on)."""
    return max(2.0, 0.1 * test_timeout)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """A test's outcome in a run: ``passed``, ``failed``, ``error``, ``skipped``,
    ``xfailed``; ``hung`` or ``crashed`` (its process was stopped, or died, in it);
    ``missing`` (collected, never run: the run's time was up)."""

    outcome: str
    message: str = ""
    seconds: float = 0.0

    @property
    def kind(self) -> str:
        """What runs are compared on: an error counts as failed, an xfail as
        skipped; hung, crashed and missing stay themselves."""
        return {"error": "failed", "xfailed": "skipped"}.get(self.outcome, self.outcome)


@dataclasses.dataclass
class Run:
    """One comm on one loop, and what its processes reported."""

    comm: str
    loop: str
    commands: list[list[str]] = dataclasses.field(default_factory=list)
    returncodes: list[int | None] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False
    outcomes: dict[str, Outcome] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"comm": self.comm, "loop": self.loop, "commands": self.commands,
                "returncodes": self.returncodes, "seconds": round(self.seconds, 1),
                "timed_out": self.timed_out,
                "outcomes": {k: dataclasses.asdict(v) for k, v in self.outcomes.items()}}


def environment(comm: str, loop: str, source: Path, events: Path) -> dict[str, str]:
    """The environment of a run: the event loop, the takeover (or none of it), the
    plugin's settings, and no bytecode written into the source tree."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("DASK_DISTRIBUTED__") and k.endswith("__PRELOAD"))}
    env.update(DASK_DISTRIBUTED__ADMIN__EVENT_LOOP=loop, ASYNCIOCOMM_UPSTREAM_COMM=comm,
               ASYNCIOCOMM_UPSTREAM_EVENTS=str(events), PYTHONDONTWRITEBYTECODE="1")
    certs = source / "distributed" / "tests"
    if certs.is_dir():
        env["ASYNCIOCOMM_UPSTREAM_CERTS"] = str(certs)
    if comm == "takeover":
        for node in PRELOAD_NODES:
            env[f"DASK_DISTRIBUTED__{node}__PRELOAD"] = '["asynciocomm.preload"]'
    return env


def command(source: Path, targets: list[str], *, runslow: bool, test_timeout: float,
            extra: list[str]) -> list[str]:
    """The pytest command line of a process (the source tree's own ``conftest.py``
    and pytest settings apply, as its rootdir)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "asynciocomm_bench.upstream.plugin",
           "-p", "no:cacheprovider", "--import-mode=importlib", f"--rootdir={source}",
           "--continue-on-collection-errors", "-q", "-rN"]
    if _has_pytest_timeout():
        # signal: a test that overruns fails alone; the thread method (distributed's
        # setting) ends the whole process.
        cmd += [f"--timeout={test_timeout:g}", "-o", "timeout_method=signal"]
    if runslow:
        cmd.append("--runslow")
    return cmd + extra + [f"{source}/{t}" for t in targets]


def _has_pytest_timeout() -> bool:
    import importlib.util

    return importlib.util.find_spec("pytest_timeout") is not None


class _Events:
    """The plugin's event lines, read as they are written."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0
        self.collected: list[str] | None = None
        self.running: str | None = None
        self.since = 0.0

    def read(self, outcomes: dict[str, Outcome]) -> None:
        if not self.path.exists():
            return
        with open(self.path) as f:
            f.seek(self.offset)
            text = f.read()
        complete = text[:text.rfind("\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            event = json.loads(line)
            if "collected" in event and self.collected is None:
                self.collected = list(event["collected"])
            elif "start" in event:
                self.running, self.since = event["start"], time.monotonic()
            elif "test" in event:
                outcomes[event["test"]] = Outcome(event["outcome"], event["message"],
                                                  round(event["seconds"], 3))
                if event["test"] == self.running:
                    self.running = None


def run(comm: str, loop: str, source: Path, targets: list[str], out: Path, tag: str, *,
        runslow: bool, test_timeout: float, run_timeout: float,
        extra: list[str], log: Any = print) -> Run:
    """Run ``targets`` (paths or node ids under ``source``) with ``comm`` on ``loop``."""
    events = _Events(out / f"events-{tag}.jsonl")
    events.path.unlink(missing_ok=True)
    result = Run(comm, loop)
    workdir = out / "cwd"
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    deadline = started + run_timeout
    todo = list(targets)
    while todo and len(result.commands) < MAX_PROCESSES:
        cmd = command(source, todo, runslow=runslow, test_timeout=test_timeout,
                      extra=extra)
        result.commands.append(cmd)
        known = len(result.outcomes)
        with open(out / f"pytest-{tag}.log", "ab") as stdout:
            proc = subprocess.Popen(cmd, cwd=workdir, stdout=stdout,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    env=environment(comm, loop, source, events.path))
            stopped = _watch(proc, events, result.outcomes, test_timeout, deadline)
        result.returncodes.append(proc.returncode)
        events.read(result.outcomes)
        if events.running is not None:  # the process ended inside a test
            if stopped is None:
                outcome = Outcome("crashed", f"the process died (exit {proc.returncode})")
            else:
                outcome = Outcome("missing" if stopped == TIME_UP else "hung", stopped)
            result.outcomes[events.running] = outcome
            events.running = None
        if stopped == TIME_UP:
            result.timed_out = True
            break
        if events.collected is None or stopped is None and (
                proc.returncode in (0, 1) or len(result.outcomes) == known):
            break  # no collection, every collected test ran, or no progress
        todo = [t for t in events.collected if t not in result.outcomes]
    why = (TIME_UP if result.timed_out
           else f"the run stopped after {len(result.commands)} processes")
    for test in events.collected or ():
        result.outcomes.setdefault(test, Outcome("missing", f"not run: {why}"))
    result.seconds = time.monotonic() - started
    odd = sum(o.kind in ("hung", "crashed", "missing") for o in result.outcomes.values())
    log(f"{tag}: {len(result.outcomes)} tests in {result.seconds:.0f} s, "
        f"{len(result.commands)} process(es), {odd} hung, crashed or missing")
    return result


def _watch(proc: subprocess.Popen[bytes], events: _Events, outcomes: dict[str, Outcome],
           test_timeout: float, deadline: float) -> str | None:
    """Wait for the process; stop it (and return why) if a test outlives
    ``test_timeout`` and the watchdog's grace, or the run's time is up."""
    limit = test_timeout + watchdog_grace(test_timeout)
    while True:
        try:
            proc.wait(timeout=POLL_S)
            return None
        except subprocess.TimeoutExpired:
            pass
        events.read(outcomes)
        now = time.monotonic()
        reason = None
        if events.running is not None and now - events.since > limit:
            reason = f"no outcome after {limit:g} s: stopped"
        elif now > deadline:
            reason = TIME_UP
        if reason is not None:
            _stop_group(proc)
            return reason


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process group (pytest and every process its tests started)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue

"""Namespaces are made, joined, and removed on every exit path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asynciocomm_bench.scale import netns

from .conftest import ours

ROOT = Path(__file__).resolve().parents[3]
#: A child that makes a network (and a process in one of its hosts), prints the
#: namespace prefix and the PID of that process, and waits to be stopped.
# The child takes SIGINT as a terminal's Ctrl-C gives it: a job that a
# non-interactive shell starts in the background (`cmd &`, as a CI script may)
# inherits SIGINT ignored, and Python then installs no KeyboardInterrupt.
CHILD = """
import signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from asynciocomm_bench.scale import netns
with netns.network(["s", "h0"]) as (hosts, why):
    assert why is None, why
    sleeper = subprocess.Popen(hosts["h0"].exec_prefix() + ["sleep", "300"])
    print(hosts["s"].netns.rsplit("-", 1)[0], sleeper.pid, flush=True)
    time.sleep(300)
"""


def _child() -> tuple[subprocess.Popen[str], str, int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    assert proc.stdout is not None
    prefix, pid = proc.stdout.readline().split()
    return proc, prefix, int(pid)


def _gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_hosts_reach_each_other_and_are_removed(namespaces: None) -> None:
    with netns.network(["s", "c", "h0"]) as (hosts, why):
        assert why is None
        prefix = hosts["s"].netns.rsplit("-", 1)[0]
        assert len(ours(prefix + "-")) == 4  # three hosts and the bridge
        assert len({h.address for h in hosts.values()}) == 3
        server = subprocess.Popen(
            hosts["s"].exec_prefix() + [sys.executable, "-c",
            "import socket; s = socket.create_server(('%s', 9999)); "
            "c, a = s.accept(); print(a[0], flush=True)" % hosts["s"].address],
            stdout=subprocess.PIPE, text=True)
        try:
            client = (f"import socket, time\nfor _ in range(100):\n try:\n"
                      f"  socket.create_connection(('{hosts['s'].address}', 9999), 2); break\n"
                      f" except OSError: time.sleep(0.05)\n")
            subprocess.run(hosts["c"].exec_prefix() + [sys.executable, "-c", client],
                           check=True, timeout=30)
            out, _ = server.communicate(timeout=30)
        finally:
            server.kill()
        assert out.strip() == hosts["c"].address  # it came over the bridge
    assert ours(prefix + "-") == []


def test_an_exception_removes_them(namespaces: None) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with netns.network(["s", "h0"]) as (hosts, _):
            prefix = hosts["s"].netns.rsplit("-", 1)[0]
            raise RuntimeError("boom")
    assert ours(prefix + "-") == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_removes_them_and_their_processes(namespaces: None, sig: int) -> None:
    proc, prefix, sleeper = _child()
    assert len(ours(prefix + "-")) == 3
    proc.send_signal(sig)
    proc.wait(30)
    assert ours(prefix + "-") == []
    assert _gone(sleeper)


def test_namespaces_of_a_killed_bench_are_swept(namespaces: None) -> None:
    proc, prefix, sleeper = _child()
    proc.kill()
    proc.wait(10)
    assert len(ours(prefix + "-")) == 3  # SIGKILL cannot clean up
    removed = netns.sweep_stale()
    assert set(removed) >= {f"{prefix}-s", f"{prefix}-h0", f"{prefix}-br"}
    assert ours(prefix + "-") == []
    assert _gone(sleeper)


def test_the_sweep_leaves_a_live_owner_alone(namespaces: None) -> None:
    with netns.network(["s"]) as (hosts, _):
        netns.sweep_stale()
        assert hosts["s"].netns in netns.list_namespaces()


def test_only_our_namespaces_can_be_deleted() -> None:
    with pytest.raises(ValueError):
        netns.delete_namespace("someone-elses")


def test_loopback_requested() -> None:
    with netns.network(["s", "h0"], loopback=True) as (hosts, why):
        assert why == "loopback requested"
        assert {h.address for h in hosts.values()} == {"127.0.0.1"}
        assert hosts["h0"].exec_prefix() == []

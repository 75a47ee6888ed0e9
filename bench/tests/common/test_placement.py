"""CPU placement of comm's processes, and the co-location sampler, on real
processes and real CPU affinity."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from asynciocomm_bench.comm import measure
from asynciocomm_bench.common import placement

two_cpus = pytest.mark.skipif(not placement.can_split(), reason="needs two CPUs")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A child that wakes every millisecond until it is stopped (by its PID, in
    teardown), so that the CPU it last ran on follows its affinity (a sleeping
    task moves only when it wakes); bounded at 120 s."""
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time\nend = time.monotonic() + 120\n"
                             "while time.monotonic() < end: time.sleep(0.001)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def own_cpus() -> Iterator[set[int]]:
    """This thread's CPUs, given back whatever the test pins."""
    cpus = os.sched_getaffinity(0)
    try:
        yield cpus
    finally:
        os.sched_setaffinity(0, cpus)


def _affinity(pid: int) -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(int(tid))) for tid in os.listdir(f"/proc/{pid}/task")}


def test_last_cpu_reads_a_cpu_this_thread_may_use() -> None:
    cpu = placement.last_cpu(os.getpid(), threading.get_native_id())
    assert cpu in os.sched_getaffinity(0)
    assert placement.last_cpu(2**22 + 12345) is None  # no such process


@two_cpus
def test_split_pins_both_processes_apart_and_gives_cpus_back(
        sleeper: subprocess.Popen[bytes], own_cpus: set[int]) -> None:
    before = _affinity(os.getpid())
    with placement.placed("split", sleeper.pid):
        mine, theirs = _affinity(os.getpid()), _affinity(sleeper.pid)
        assert len(mine) == 1 and len(theirs) == 1
        (mine_cpus,), (their_cpus,) = mine, theirs
        assert len(mine_cpus) == 1 and len(their_cpus) == 1 and mine_cpus != their_cpus
    assert _affinity(os.getpid()) == before


def test_free_placement_pins_nothing(sleeper: subprocess.Popen[bytes]) -> None:
    before, theirs = _affinity(os.getpid()), _affinity(sleeper.pid)
    with placement.placed("free", sleeper.pid):
        assert _affinity(os.getpid()) == before and _affinity(sleeper.pid) == theirs
    with pytest.raises(ValueError, match="unknown placement"):
        with placement.placed("nearby", sleeper.pid):
            pass


def _samples(colo: placement.Colocation, start: tuple[int, int],
             want: int = 20) -> tuple[int, int]:
    """(same, sampled) since ``start`` once ``want`` samples came (at most 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        same, sampled = colo.counts()
        if sampled - start[1] >= want or time.monotonic() > deadline:
            return same - start[0], sampled - start[1]
        time.sleep(placement.SAMPLE_INTERVAL_S)


@two_cpus
def test_colocation_counts_shared_cpus(sleeper: subprocess.Popen[bytes],
                                       own_cpus: set[int]) -> None:
    """The sampler compares this thread's last CPU with the server's: all
    samples on one CPU when both are pinned there, none when pinned apart."""
    first, second = sorted(own_cpus)[:2]
    os.sched_setaffinity(0, {first})
    os.sched_setaffinity(sleeper.pid, {first})
    with placement.Colocation(sleeper.pid) as colo:
        same, sampled = _samples(colo, (0, 0))
        assert sampled >= 20 and same == sampled
        os.sched_setaffinity(sleeper.pid, {second})
        _samples(colo, colo.counts(), want=2)  # it wakes on its new CPU meanwhile
        start = colo.counts()
        same, sampled = _samples(colo, start)
        assert sampled >= 20 and same == 0
    assert colo.counts() == colo.counts()  # stopped: the counts no longer move


def test_the_sampler_is_housekeeping_and_stops_with_its_server(
        sleeper: subprocess.Popen[bytes]) -> None:
    """Its CPU is not the sender's, and it ends once the server is gone."""
    assert placement.SAMPLER_NAME.startswith(measure.HOUSEKEEPING_PREFIX)
    colo = placement.Colocation(sleeper.pid)
    with colo:
        sleeper.kill()
        sleeper.wait(timeout=30)
        colo._thread.join(timeout=30)
        assert not colo._thread.is_alive()

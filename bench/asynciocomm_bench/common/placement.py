"""Where ``comm``'s client and server run, and how often they shared a CPU.

The comm suite's sender (the bench process) and receiver (a server process) run
on one machine. In a cluster they are on different hosts; here they compete
for the same CPUs, and on a small machine the kernel's wake-up balancing now
and then puts both on one CPU, where each waits for the other. That decides a
large one-way transfer more than the comm does. Measured here (2 CPUs, 16 MiB
one-way on uvloop, 1 s windows, three repetitions each): both processes pinned
to one CPU, 1.27-1.80 GiB/s; pinned to one CPU each, 2.44-3.08 GiB/s; for stock
``tcp``, asynciocomm and the bare protocol alike. Left free, a repetition's
throughput follows how much of it the two spent on one CPU.

* ``free`` (the default) leaves placement to the kernel, as a user's processes
  are, and records the share of each timed window in which the client's event
  loop and the server's last ran on the same CPU (``*_colocated``).
* ``split`` pins the client to one CPU and the server to another, as two hosts:
  the transport's cost without the placement lottery. It needs two CPUs.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

PLACEMENTS = ("free", "split")
#: How often the sampler reads the two threads' last CPU: 200 samples per
#: second give a timed window of 0.5 s 100 of them, for about 40 µs of CPU per
#: sample here (two small /proc reads), well under 1 % of one CPU.
SAMPLE_INTERVAL_S = 0.005
#: The sampler's thread name: ``measure`` leaves threads with this prefix out
#: of the sender's CPU.
SAMPLER_NAME = "bench-colocation"


def last_cpu(pid: int, tid: int | None = None) -> int | None:
    """The CPU a thread last ran on (field 39 of its ``stat``), or None once
    it is gone."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    try:
        with open(path, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields follow the last ")".
    return int(stat.rsplit(b")", 1)[1].split()[36])


class Colocation:
    """A thread that samples, every SAMPLE_INTERVAL_S, whether the bench's
    calling thread (the client's event loop) and the server's main thread last
    ran on the same CPU. Bounded by its ``stop``: a ``with`` block."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.client_tid = threading.get_native_id()
        self._same = 0
        self._sampled = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=SAMPLER_NAME, daemon=True)

    def __enter__(self) -> Colocation:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        pid = os.getpid()
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            mine = last_cpu(pid, self.client_tid)
            theirs = last_cpu(self.server_pid)
            if theirs is None:  # the server has exited
                return
            if mine is not None:
                self._sampled += 1
                self._same += mine == theirs

    def counts(self) -> tuple[int, int]:
        """(samples with both on one CPU, samples), since the start."""
        return self._same, self._sampled


def _pin(pid: int, cpus: set[int]) -> None:
    """Pin every thread of ``pid``; threads started later inherit it from the
    thread that starts them."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that just ended
            os.sched_setaffinity(int(tid), cpus)


def can_split() -> bool:
    return len(os.sched_getaffinity(0)) >= 2


@contextlib.contextmanager
def placed(placement: str, server_pid: int) -> Iterator[None]:
    """Apply ``placement`` to this process and the server for the block; this
    process gets its CPUs back afterwards."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}; one of {PLACEMENTS}")
    if placement == "free":
        yield
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise RuntimeError("--placement split needs two CPUs")
    _pin(server_pid, {cpus[1]})
    _pin(os.getpid(), {cpus[0]})
    try:
        yield
    finally:
        _pin(os.getpid(), set(cpus))

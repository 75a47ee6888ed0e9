"""Scheduler-bound task graphs of ``cluster``: many tiny coroutine tasks.

The task functions are coroutines, so that workers run them on their event
loop and the scheduler, not the thread pools, is the bottleneck. They live
in this importable module so that workers unpickle them by reference.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any


async def ainc(x: int) -> int:
    """x + 1."""
    return x + 1


async def asum(*xs: int) -> int:
    """The sum of the arguments."""
    return sum(xs)


async def apart(x: int, i: int) -> int:
    """One output partition of an input: a tiny value derived from both."""
    return x * 7 + i


def loop_cpu() -> float:
    """CPU seconds of the calling thread (run on the scheduler's loop thread)."""
    return time.thread_time()


def loop_class() -> str:
    """The class of the running loop of the calling thread."""
    cls = type(asyncio.get_running_loop())
    return f"{cls.__module__}.{cls.__qualname__}"


def ntasks(dsk: dict[Any, Any]) -> int:
    """Number of tasks of a graph."""
    return len(dsk)


@dataclasses.dataclass
class Workload:
    """A graph, the key to compute and its expected result."""

    name: str
    dsk: dict[Any, Any]
    key: Any
    expected: int

    @property
    def ntasks(self) -> int:
        return len(self.dsk)


def _reduce(dsk: dict[Any, Any], prefix: str, keys: list[Any], fan: int) -> Any:
    level = 0
    while len(keys) > 1:
        nxt = []
        for j in range(0, len(keys), fan):
            k = (f"{prefix}-{level}", j // fan)
            dsk[k] = (asum, *keys[j:j + fan])
            nxt.append(k)
        keys, level = nxt, level + 1
    return keys[0]


def wide(n: int, fan: int = 32) -> Workload:
    """A map of ``n`` tiny tasks, summed by a tree of fan-in ``fan``."""
    dsk: dict[Any, Any] = {("wide-map", i): (ainc, i) for i in range(n)}
    key = _reduce(dsk, "wide-sum", list(dsk), fan)
    return Workload("wide", dsk, key, n * (n + 1) // 2)


def tree(n: int) -> Workload:
    """``n`` leaves reduced by a binary tree (about 2n tasks)."""
    dsk: dict[Any, Any] = {("tree-leaf", i): (ainc, i) for i in range(n)}
    key = _reduce(dsk, "tree-sum", list(dsk), 2)
    return Workload("tree", dsk, key, n * (n + 1) // 2)


def shuffle(n: int) -> Workload:
    """An all-to-all: n inputs, n×n split tasks, n outputs each reading n splits."""
    dsk: dict[Any, Any] = {("shuf-in", i): (ainc, i) for i in range(n)}
    for i in range(n):
        for j in range(n):
            dsk[("shuf-split", i, j)] = (apart, ("shuf-in", i), j)
    for j in range(n):
        dsk[("shuf-out", j)] = (asum, *[("shuf-split", i, j) for i in range(n)])
    key = _reduce(dsk, "shuf-total", [("shuf-out", j) for j in range(n)], 32)
    expected = sum((i + 1) * 7 + j for i in range(n) for j in range(n))
    return Workload("shuffle", dsk, key, expected)


def build(sizes: dict[str, int]) -> list[Workload]:
    """The workloads named in ``sizes`` (wide, tree, shuffle), in that order."""
    makers = {"wide": wide, "tree": tree, "shuffle": shuffle}
    return [makers[name](n) for name, n in sizes.items() if n > 0]

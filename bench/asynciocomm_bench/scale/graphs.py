"""The workloads of the scale bench.

- ``map``: ``client.map(inc, range(n))`` with ``inc`` defined in the calling
  function, so that it is pickled by value (cloudpickle), as a user's local
  function or lambda is; the tasks are short and independent.
- ``wide``, ``tree``, ``shuffle``: the ``cluster`` bench's graphs
  (:mod:`asynciocomm_bench.workloads`), coroutine tasks submitted as one graph each.
- ``graph``: a large graph in one submission, where ``update_graph`` matters:
  ``width`` chains of ``depth`` tasks (:func:`chains`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from asynciocomm_bench.cluster import workloads
from asynciocomm_bench.cluster.workloads import Workload, ainc

NAMES = ("map", "wide", "tree", "shuffle", "graph")


def chains(width: int, depth: int) -> Workload:
    """``width`` chains of ``depth`` tasks, all in one submission, summed by a
    tree at the end: ``width * depth`` tasks and as many dependencies for
    ``update_graph`` to take in and order, while each chain stays on the worker
    that holds its last result (a graph with many transfers between hundreds of
    workers on two cores measures the workers, not the scheduler)."""
    dsk: dict[Any, Any] = {("chain-0", i): (ainc, i) for i in range(width)}
    for d in range(1, depth):
        for i in range(width):
            dsk[(f"chain-{d}", i)] = (ainc, (f"chain-{d - 1}", i))
    key = workloads._reduce(dsk, "chain-sum", [(f"chain-{depth - 1}", i)
                                               for i in range(width)], 32)
    return Workload("graph", dsk, key, sum(i + depth for i in range(width)))


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The size of each workload (0 leaves it out)."""

    map: int = 20_000
    wide: int = 20_000
    tree: int = 4096
    shuffle: int = 50
    graph_width: int = 4000
    graph_depth: int = 5

    def names(self) -> list[str]:
        """The workloads that run, in order."""
        on = {"map": self.map, "wide": self.wide, "tree": self.tree,
              "shuffle": self.shuffle, "graph": self.graph_width * self.graph_depth}
        return [n for n in NAMES if on[n] > 0]


def graph(name: str, sizes: Sizes) -> Workload:
    """The graph workload ``name`` (not ``map``, which is not a graph)."""
    if name == "graph":
        return chains(sizes.graph_width, sizes.graph_depth)
    return workloads.build({name: getattr(sizes, name)})[0]


async def submit_map(client: Any, n: int) -> list[Any]:
    """Submit ``n`` independent tasks of a function pickled by value and wait
    for them all; returns their futures (the caller checks and drops them)."""
    from distributed import wait

    def inc(x: int) -> int:
        return x + 1

    futures = client.map(inc, range(n))
    await wait(futures)
    return futures


async def check_map(client: Any, futures: list[Any]) -> None:
    """Raise unless the first and last results of :func:`submit_map` are right."""
    first, last = await client.gather([futures[0], futures[-1]])
    if (first, last) != (1, len(futures)):
        raise RuntimeError(f"map: results {first}, {last} != 1, {len(futures)}")

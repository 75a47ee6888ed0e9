"""The workloads of the scale bench.

- ``map``: ``client.map(inc, range(n))`` with ``inc`` defined in the calling
  function, so that it is pickled by value (cloudpickle), as a user's local
  function or lambda is; the tasks are short and independent.
- ``wide``, ``tree``, ``shuffle``: the ``cluster`` bench's graphs
  (:mod:`bench.workloads`), coroutine tasks submitted as one graph each.
- ``graph``: a large layered graph in one submission, where ``update_graph``
  matters: ``depth`` layers of ``width`` tasks, each task of a layer reading
  three neighbours of the layer below, summed by a tree at the end.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.cluster import workloads
from bench.cluster.workloads import Workload, ainc, asum

NAMES = ("map", "wide", "tree", "shuffle", "graph")


def layered(width: int, depth: int) -> Workload:
    """``depth`` layers of ``width`` tasks; task i of a layer sums tasks i-1, i
    and i+1 (wrapping) of the layer below. About ``width * depth`` tasks."""
    dsk: dict[Any, Any] = {("layer-0", i): (ainc, i) for i in range(width)}
    values = [i + 1 for i in range(width)]
    for d in range(1, depth):
        for i in range(width):
            dsk[(f"layer-{d}", i)] = (asum, *[(f"layer-{d - 1}", (i + k) % width)
                                             for k in (-1, 0, 1)])
        values = [values[(i - 1) % width] + values[i] + values[(i + 1) % width]
                  for i in range(width)]
    key = workloads._reduce(dsk, "layer-sum", [(f"layer-{depth - 1}", i)
                                               for i in range(width)], 32)
    return Workload("graph", dsk, key, sum(values))


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The size of each workload (0 leaves it out)."""

    map: int = 20_000
    wide: int = 20_000
    tree: int = 4096
    shuffle: int = 50
    graph_width: int = 5000
    graph_depth: int = 8

    def names(self) -> list[str]:
        """The workloads that run, in order."""
        on = {"map": self.map, "wide": self.wide, "tree": self.tree,
              "shuffle": self.shuffle, "graph": self.graph_width * self.graph_depth}
        return [n for n in NAMES if on[n] > 0]


def graph(name: str, sizes: Sizes) -> Workload:
    """The graph workload ``name`` (not ``map``, which is not a graph)."""
    if name == "graph":
        return layered(sizes.graph_width, sizes.graph_depth)
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

"""The scale workloads' graphs compute the result they expect."""

from __future__ import annotations

from typing import Any

import pytest

from asynciocomm_bench.scale import graphs


async def _evaluate(dsk: dict[Any, Any], key: Any, memo: dict[Any, Any]) -> Any:
    if key in memo:
        return memo[key]
    func, *args = dsk[key]
    vals = [await _evaluate(dsk, a, memo) if (isinstance(a, tuple) and a in dsk) else a
            for a in args]
    memo[key] = await func(*vals)
    return memo[key]


@pytest.mark.parametrize("name", ["wide", "tree", "shuffle", "graph"])
async def test_expected(name: str) -> None:
    sizes = graphs.Sizes(map=0, wide=40, tree=16, shuffle=4, graph_width=7, graph_depth=3)
    wl = graphs.graph(name, sizes)
    assert await _evaluate(wl.dsk, wl.key, {}) == wl.expected


def test_chains_have_one_dependency_per_link() -> None:
    wl = graphs.chains(10, 4)
    deps = [a for task in wl.dsk.values() for a in task[1:] if isinstance(a, tuple)]
    links = [d for d in deps if d[0].startswith("chain-")]
    assert len(links) == 10 * 3 + 10  # the chains, then the ends into the sum tree
    assert graphs.Sizes().names() == ["map", "wide", "tree", "shuffle", "graph"]

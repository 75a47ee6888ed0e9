"""Array workloads: reductions, stencils, a matrix product and rechunks.

From coiled/benchmarks' ``test_array.py`` and ``test_rechunk.py``, scaled from a
cluster of 10 two-core workers with 77 GiB to 2 workers on a 2-core machine:

- ``anom_mean``: rows of 10 MiB (one row per chunk) grouped by ``row % groups``
  (100 rows per group there; here 2 groups of 12 rows, 100 rows per group from
  ``--scale 25``); the anomaly (each row minus its group's mean, the
  climatology) averaged over all rows. Written with dask.array alone: each
  group is a strided selection, reduced, subtracted and joined back, as an
  xarray ``groupby`` without flox builds it. With equal groups the exact answer
  is 0 everywhere.
- ``vorticity``: ``dx·u − dy·v`` over layers of square 2-D fields, one layer per
  chunk, after padding the first axis by one element (wrap) and merging that
  element's chunk back in.
- ``double_diff``: ``a[1:, 1:] − b[:-1, :-1]`` on two square arrays of 20 MiB
  chunks: the slices are offset, so each output chunk reads four chunks of each.
- ``dot_product``: ``(a @ a.T).sum()``.
- ``map_overlap``: an identity ``map_overlap`` (depth 1) over 40,000 chunks of
  50 × 50, of which a 10 × 10 window is computed.
- ``rechunk_tasks``, ``rechunk_p2p``: "swap axes", columns of 8 MiB into rows,
  an all-to-all, by tasks and by P2P, then summed.

The data are random, from seeded generators, so every run computes the same
numbers. "devnull" sinks of the originals are sums here, so that the answer
can be checked.
"""

from __future__ import annotations

import math
from typing import Any

from asynciocomm_bench.workloads.answers import Answer, array_answer
from asynciocomm_bench.workloads.workload import SMALL, Params, Workload, identity_answer, scaled

MiB = 1 << 20


def _rng(seed: int) -> Any:
    import dask.array as da

    return da.random.default_rng(seed)


def _chunk_bytes(base: int, scale: float, floor: int = 256 * 1024) -> int:
    """Chunks keep their size from scale 1 up, and shrink below it, so that a
    small run still has many chunks."""
    return max(floor, int(base * min(1.0, scale)))


def _side(base: int, scale: float, floor: int) -> int:
    """A square's side for ``scale`` times the data of ``base × base``."""
    return max(floor, int(base * math.sqrt(scale)))


def _threads(build: Any, p: Params) -> Any:
    """Compute ``build(p)`` with dask's local threaded scheduler."""
    import dask

    return dask.compute(build(p), scheduler="threads")[0]


# anom_mean ------------------------------------------------------------------

def _anom_size(scale: float) -> Params:
    rows = scaled(24, scale, 8)
    groups = max(2, rows // 100)
    width = max(4096, int(10 * MiB // 8 * min(1.0, 10 * scale)))
    return {"rows": rows - rows % groups, "groups": groups, "width": width, "seed": 11}


def _anom_graph(p: Params) -> Any:
    import dask.array as da

    data = _rng(p["seed"]).random((p["rows"], p["width"]), chunks=(1, p["width"]))
    parts = []
    for g in range(p["groups"]):
        members = data[g::p["groups"]]
        parts.append(members - members.mean(axis=0))
    return da.concatenate(parts, axis=0).mean(axis=0)


def _anom_run(client: Any, p: Params) -> Answer:
    return array_answer(_anom_graph(p).compute())


def _anom_expected(p: Params) -> Answer:
    return {"shape": str(p["width"]), "sum": 0.0, "sumsq": 0.0, "maxabs": 0.0}


# vorticity ------------------------------------------------------------------

def _vort_size(scale: float) -> Params:
    return {"side": 1000 if scale > SMALL else 200, "layers": scaled(16, scale, 4),
            "seed": 12}


def _vort_graph(p: Params) -> Any:
    import dask.array as da

    n, k = p["side"], p["layers"]
    rng = _rng(p["seed"])
    u = rng.random((n, n, k), chunks=(n, n, 1))
    v = rng.random((n, n, k), chunks=(n, n, 1))
    dx = rng.random((n + 1, n), chunks=(n + 1, n))
    dy = rng.random((n + 1, n), chunks=(n + 1, n))

    def pad_rechunk(a: Any) -> Any:
        padded = da.pad(a, pad_width=[(0, 1), (0, 0), (0, 0)], mode="wrap")
        return padded.rechunk((n + 1, n, 1))

    return (dx[..., None] * pad_rechunk(u) - dy[..., None] * pad_rechunk(v)).sum()


def _vort_run(client: Any, p: Params) -> Answer:
    return {"sum": float(_vort_graph(p).compute())}


def _vort_expected(p: Params) -> Answer:
    return {"sum": float(_threads(_vort_graph, p))}


# double_diff ----------------------------------------------------------------

def _diff_size(scale: float) -> Params:
    return {"side": _side(4096, scale, 400), "chunk": _chunk_bytes(20 * MiB, scale),
            "seed": 13}


def _diff_graph(p: Params) -> Any:
    rng = _rng(p["seed"])
    shape, chunks = (p["side"], p["side"]), p["chunk"]
    a = rng.random(shape, chunks=chunks)
    b = rng.random(shape, chunks=chunks)
    return (a[1:, 1:] - b[:-1, :-1]).sum()


def _diff_run(client: Any, p: Params) -> Answer:
    return {"sum": float(_diff_graph(p).compute())}


def _diff_expected(p: Params) -> Answer:
    return {"sum": float(_threads(_diff_graph, p))}


# dot_product ----------------------------------------------------------------

def _dot_size(scale: float) -> Params:
    block = max(128, int(1024 * math.sqrt(min(1.0, scale))))
    return {"side": max(2 * block, int(2048 * math.sqrt(scale))), "block": block,
            "seed": 14}


def _dot_graph(p: Params) -> Any:
    a = _rng(p["seed"]).random((p["side"], p["side"]), chunks=p["block"])
    return (a @ a.T).sum()


def _dot_run(client: Any, p: Params) -> Answer:
    return {"sum": float(_dot_graph(p).compute())}


def _dot_expected(p: Params) -> Answer:
    return {"sum": float(_threads(_dot_graph, p))}


# map_overlap ----------------------------------------------------------------

def same(block: Any) -> Any:
    """The identity, as the block function of ``map_overlap``."""
    return block


def _overlap_size(scale: float) -> Params:
    return {"side": _side(2500, scale, 500), "block": 50, "seed": 15}


def _overlap_graph(p: Params) -> Any:
    x = _rng(p["seed"]).random((p["side"], p["side"]), chunks=p["block"])
    mid = p["side"] // 2
    return x.map_overlap(same, depth=1)[mid:mid + 10, mid:mid + 10]


def _overlap_run(client: Any, p: Params) -> Answer:
    return array_answer(_overlap_graph(p).compute())


def _overlap_expected(p: Params) -> Answer:
    return array_answer(_threads(_overlap_graph, p))


# rechunk --------------------------------------------------------------------

def _rechunk_size(scale: float) -> Params:
    return {"side": _side(4096, scale, 512), "chunk": _chunk_bytes(8 * MiB, scale),
            "seed": 16}


def _swap_axes(p: Params, method: str) -> Any:
    import dask

    with dask.config.set({"array.rechunk.method": method, "array.chunk-size": p["chunk"]}):
        a = _rng(p["seed"]).random((p["side"], p["side"]), chunks=(-1, "auto"))
        return a.rechunk(("auto", -1)).sum()


def _rechunk_run(method: str) -> Any:
    def run(client: Any, p: Params) -> Answer:
        import dask

        total = _swap_axes(p, method)
        with dask.config.set({"array.rechunk.method": method}):
            return {"sum": float(total.compute())}
    return run


def _rechunk_expected(p: Params) -> Answer:
    return {"sum": float(_threads(lambda q: _swap_axes(q, "tasks"), p))}


WORKLOADS = [
    Workload("anom_mean", "array",
             "24 rows of 10 MiB, 2 groups: mean of (row − its group's mean)",
             _anom_size, _anom_run, identity_answer, _anom_expected),
    Workload("vorticity", "array",
             "dx·u − dy·v, 16 layers of 1000 × 1000 (8 MB chunks), padded and "
             "rechunked, summed", _vort_size, _vort_run, identity_answer, _vort_expected),
    Workload("double_diff", "array",
             "a[1:, 1:] − b[:-1, :-1], 4096 × 4096 each in 20 MiB chunks, summed",
             _diff_size, _diff_run, identity_answer, _diff_expected),
    Workload("dot_product", "array", "(a @ a.T).sum(), 2048 × 2048 in 8 MiB chunks",
             _dot_size, _dot_run, identity_answer, _dot_expected),
    Workload("map_overlap", "array",
             "identity map_overlap (depth 1) on 2500 × 2500 in 50 × 50 chunks, "
             "a 10 × 10 window computed", _overlap_size, _overlap_run, identity_answer,
             _overlap_expected),
    Workload("rechunk_tasks", "rechunk",
             "4096 × 4096 (128 MiB) from columns to rows of 8 MiB, by tasks, summed",
             _rechunk_size, _rechunk_run("tasks"), identity_answer, _rechunk_expected),
    Workload("rechunk_p2p", "rechunk",
             "4096 × 4096 (128 MiB) from columns to rows of 8 MiB, by P2P, summed",
             _rechunk_size, _rechunk_run("p2p"), identity_answer, _rechunk_expected),
]

"""Dataframe workloads: a shuffle, ``set_index``, a groupby with ``split_out``, a join.

From coiled/benchmarks' ``test_dataframe.py``, ``test_join.py`` and
``test_groupby.py``, on ``dask.datasets.timeseries`` frames (seeded):

- ``df_shuffle``: 100 float columns, one row per 1.2 s, one partition per day
  (about 55 MiB each), shuffled on a column by tasks;
- ``set_index``: the default timeseries columns (name, id, x, y) at one row per
  100 ms (864,000 rows a day), indexed by ``int(x·1e9)``, by P2P;
- ``groupby_split_out``: ``groupby(key).agg({x: sum, y: mean}, split_out=8)`` over
  100,000 keys taken from x, shuffled by tasks;
- ``join_p2p``: two such frames joined on ``int(x·1e9)`` (inner), by P2P.

The answer of a frame is its row count and the sum of its row hashes
(:func:`asynciocomm_bench.workloads.answers.frame_digest`), which does not depend on the
order of rows or partitions; a sorted index is checked as well. The groupby's
float aggregates are checked as sums within the float tolerance.
"""

from __future__ import annotations

import datetime
from typing import Any

from asynciocomm_bench.workloads.answers import DIGEST_META, Answer, digest_answer, frame_digest
from asynciocomm_bench.workloads.workload import SMALL, Params, Workload, identity_answer, scaled

START = datetime.date(2020, 1, 1)


def _timeseries(days: int, freq: str, seed: int, dtypes: dict[str, Any] | None = None) -> Any:
    import dask

    end = START + datetime.timedelta(days=days)
    return dask.datasets.timeseries(start=str(START), end=str(end), freq=freq,
                                    partition_freq="1D", dtypes=dtypes, seed=seed)


def _digest(frame: Any, scheduler: str | None = None) -> Answer:
    parts = frame.map_partitions(frame_digest, meta=DIGEST_META)
    return digest_answer(parts.compute(scheduler=scheduler))


# df_shuffle -----------------------------------------------------------------

def _shuffle_size(scale: float) -> Params:
    small = scale <= SMALL
    return {"days": scaled(2, scale, 2), "freq": "60s" if small else "1200ms",
            "columns": 10 if small else 100, "seed": 21}


def _shuffle_frame(p: Params) -> Any:
    return _timeseries(p["days"], p["freq"], p["seed"],
                       {str(i): float for i in range(p["columns"])})


def _shuffle_run(client: Any, p: Params) -> Answer:
    return _digest(_shuffle_frame(p).shuffle("0", shuffle_method="tasks"))


def _shuffle_expected(p: Params) -> Answer:
    return _digest(_shuffle_frame(p), "threads")


# set_index ------------------------------------------------------------------

def _rows_frame(days: int, seed: int, small: bool) -> Any:
    df = _timeseries(days, "10s" if small else "100ms", seed)
    # int(x·1e9) is nearly unique at full size, where two frames of millions of
    # rows still share thousands of keys; a small run coarsens it to share some
    df["x2"] = (df["x"] * (1e4 if small else 1e9)).astype("int64")
    return df


def _index_size(scale: float) -> Params:
    return {"days": scaled(1, scale, 1), "small": scale <= SMALL, "seed": 22}


def sorted_digest(df: Any) -> Any:
    """:func:`frame_digest` with the partition's first and last index value and
    whether its index is sorted."""
    out = frame_digest(df)
    out["lo"] = df.index.min() if len(df) else 0
    out["hi"] = df.index.max() if len(df) else 0
    out["sorted"] = int(df.index.is_monotonic_increasing)
    return out


def _sorted_answer(parts: Any) -> Answer:
    out = digest_answer(parts)
    nonempty = parts[parts["rows"] > 0]
    ordered = (nonempty["hi"].to_numpy()[:-1] <= nonempty["lo"].to_numpy()[1:]).all()
    out["sorted"] = int(bool(nonempty["sorted"].all() and ordered))
    return out


def _index_run(client: Any, p: Params) -> Answer:
    df = _rows_frame(p["days"], p["seed"], p["small"])
    indexed = df.set_index("x2", shuffle_method="p2p")
    meta = {**DIGEST_META, "lo": "i8", "hi": "i8", "sorted": "i8"}
    return _sorted_answer(indexed.map_partitions(sorted_digest, meta=meta).compute())


def _set_index_partition(df: Any) -> Any:
    return frame_digest(df.set_index("x2"))


def _index_expected(p: Params) -> Answer:
    df = _rows_frame(p["days"], p["seed"], p["small"])
    parts = df.map_partitions(_set_index_partition, meta=DIGEST_META)
    return {**digest_answer(parts.compute(scheduler="threads")), "sorted": 1}


# groupby_split_out ----------------------------------------------------------

def _groupby_size(scale: float) -> Params:
    return {"days": scaled(8, scale, 2), "keys": scaled(100_000, scale, 100),
            "split_out": 8, "small": scale <= SMALL, "seed": 23}


def _keyed_frame(p: Params) -> Any:
    df = _timeseries(p["days"], "60s" if p["small"] else "1s", p["seed"])
    df["key"] = ((df["x"] + 1) * (p["keys"] / 2)).astype("int64").clip(0, p["keys"] - 1)
    return df


def aggregate_digest(df: Any) -> Any:
    """Groups, the hash of their keys, and the sums of both aggregates."""
    import pandas as pd

    keys = pd.util.hash_pandas_object(df.index.to_series(), index=False)
    return pd.DataFrame({"rows": [len(df)], "hash": [int(keys.to_numpy(dtype="u8").sum(
        dtype="u8"))], "x": [float(df["x"].sum())], "y": [float(df["y"].sum())]}).astype(
        {"rows": "u8", "hash": "u8"})


def _aggregate_answer(parts: Any) -> Answer:
    return {**digest_answer(parts), "x": float(parts["x"].sum()),
            "y": float(parts["y"].sum())}


def _groupby(p: Params, split_out: int) -> Any:
    agg = _keyed_frame(p).groupby("key").agg({"x": "sum", "y": "mean"},
                                             split_out=split_out, shuffle_method="tasks")
    meta = {**DIGEST_META, "x": "f8", "y": "f8"}
    return agg.map_partitions(aggregate_digest, meta=meta)


def _groupby_run(client: Any, p: Params) -> Answer:
    return _aggregate_answer(_groupby(p, p["split_out"]).compute())


def _groupby_expected(p: Params) -> Answer:
    return _aggregate_answer(_groupby(p, 1).compute(scheduler="threads"))


# join_p2p -------------------------------------------------------------------

def _join_size(scale: float) -> Params:
    return {"days": scaled(1, scale, 1), "small": scale <= SMALL, "seeds": (31, 32)}


def _joined(p: Params, method: str) -> Any:
    import dask.dataframe as dd

    left, right = (_rows_frame(p["days"], seed, p["small"]) for seed in p["seeds"])
    return dd.merge(left, right, on="x2", how="inner", shuffle_method=method)


def _join_run(client: Any, p: Params) -> Answer:
    return _digest(_joined(p, "p2p"))


def _join_expected(p: Params) -> Answer:
    return _digest(_joined(p, "tasks"), "threads")


WORKLOADS = [
    Workload("df_shuffle", "dataframe",
             "2 days × 72,000 rows × 100 floats (55 MiB partitions), shuffle by tasks",
             _shuffle_size, _shuffle_run, identity_answer, _shuffle_expected),
    Workload("set_index", "dataframe",
             "1 day × 864,000 rows (name, id, x, y), set_index(int(x·1e9)) by P2P",
             _index_size, _index_run, identity_answer, _index_expected),
    Workload("groupby_split_out", "dataframe",
             "8 days × 86,400 rows, groupby over 100,000 keys, agg(x sum, y mean), "
             "split_out=8, by tasks", _groupby_size, _groupby_run, identity_answer,
             _groupby_expected),
    Workload("join_p2p", "dataframe",
             "two frames of 1 day × 864,000 rows, inner merge on int(x·1e9) by P2P",
             _join_size, _join_run, identity_answer, _join_expected),
]

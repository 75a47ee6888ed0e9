"""The order of a pair's runs (ABBA) and the catalog's sizes."""

from __future__ import annotations

import pytest

from asynciocomm_bench.common.options import BenchError
from asynciocomm_bench.workloads import catalog, suite


def test_pairs_alternate_which_comm_runs_first() -> None:
    opts = suite.Options(loops=["uvloop"], tls=[False], pairs=2, scale=0.01, workers=2,
                         threads=1, timeout_s=60, budget_s=600)
    wls = catalog.select(["single_future", "large_map"])
    first = suite.pair_plan(wls, 0, "uvloop", False, opts)
    second = suite.pair_plan(wls, 1, "uvloop", True, opts)
    assert [(r["workload"], r["scheme"]) for r in first] == [
        ("single_future", "tcp"), ("single_future", "asyncio"),
        ("large_map", "asyncio"), ("large_map", "tcp")]
    assert [(r["workload"], r["scheme"]) for r in second] == [
        ("single_future", "asyncio+tls"), ("single_future", "tls"),
        ("large_map", "tls"), ("large_map", "asyncio+tls")]
    assert [r["index"] for r in first] == [0, 1, 2, 3]


def test_the_catalog_has_the_issue_workloads_and_sizes_grow_with_scale() -> None:
    names = [w.name for w in catalog.all_workloads()]
    assert names == ["single_future", "large_map", "anom_mean", "vorticity", "double_diff",
                     "dot_product", "map_overlap", "rechunk_tasks", "rechunk_p2p",
                     "df_shuffle", "set_index", "groupby_split_out", "join_p2p",
                     "trivial_fanout", "stealing_inhomogeneous", "stealing_straggler"]
    for w in catalog.all_workloads():
        small, full, big = (w.size(s) for s in (0.001, 1.0, 10.0))
        assert small != full != big, w.name
    with pytest.raises(BenchError, match="unknown workload nope"):
        catalog.select(["nope"])


def test_an_answer_must_be_right_and_the_same_on_both_comms() -> None:
    checker = suite.Checker({"w": {"n": 2, "sum": 1.0}})
    run = {"workload": "w", "loop": "uvloop", "scheme": "tcp", "answer": {"n": 2, "sum": 1.0}}
    assert checker.check(run, False) is None
    # right within the float tolerance, and the same as tcp's within it too
    ours = {**run, "scheme": "asyncio", "answer": {"n": 2, "sum": 1.0 + 1e-12}}
    assert checker.check(ours, False) is None
    wrong = {**run, "scheme": "asyncio", "answer": {"n": 3, "sum": 1.0}}
    assert checker.check(wrong, False) == "wrong answer: n: 3 != 2"
    assert checker.check({**run, "workload": "x"}, False) == "no right answer to check against"
    assert checker.counts["w"] == {"runs": 3, "right": 2, "same": 2}


def test_the_order_effect_is_first_over_second_whichever_comm_ran_first() -> None:
    from asynciocomm_bench.workloads.report import order_effect, order_effects

    def run(scheme: str, pair: int, first: bool, wall: float) -> dict:
        return {"workload": "w", "scheme": scheme, "loop": "uvloop", "pair": pair,
                "first": first, "wall_s": wall}

    runs = [run("tcp", 0, True, 4.0), run("asyncio", 0, False, 1.0),
            run("asyncio", 1, True, 3.0), run("tcp", 1, False, 1.5),
            run("tls", 0, True, 1.0), {**run("asyncio+tls", 0, False, 0), "error": "x"}]
    assert order_effects(runs) == {"w": [4.0, 2.0]}  # the pair with an error counts not
    assert "| w | 3.00 | 2.00–4.00 | 2 |" in order_effect(runs)

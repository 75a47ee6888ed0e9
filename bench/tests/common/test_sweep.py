"""The sweep that every suite runs: repetitions within a budget, failures recorded."""

from __future__ import annotations

from asynciocomm_bench.common.sweep import Sweep


def test_every_repetition_runs_within_the_budget() -> None:
    sweep = Sweep("comm", 3, budget_s=1e9)
    logged: list[str] = []
    assert list(sweep.repetitions(logged.append)) == [0, 1, 2]
    assert (sweep.reps_done, sweep.truncated, sweep.errors, logged) == (3, False, [], [])


def test_the_budget_stops_the_next_repetition_and_says_so() -> None:
    """The first repetition always runs; the next would end after a budget of 0."""
    sweep = Sweep("workloads", 5, budget_s=0.0, unit="pairs")
    logged: list[str] = []
    ran = list(sweep.repetitions(logged.append))
    assert ran == [0] and sweep.reps_done == 1 and sweep.truncated
    assert logged == ["workloads: time budget reached after 1 pairs"]


def test_a_repetition_counts_once_the_next_is_asked_for() -> None:
    sweep = Sweep("cluster", 2, budget_s=1e9)
    reps = sweep.repetitions(print)
    assert next(reps) == 0 and sweep.reps_done == 0
    assert next(reps) == 1 and sweep.reps_done == 1


def test_a_failure_is_recorded_with_its_traceback_and_extra_keys_in_order() -> None:
    sweep = Sweep("scale", 1, budget_s=1e9)
    try:
        raise ValueError("x" * 50)
    except ValueError as exc:
        sweep.failed(0, "tcp@asyncio", exc, cut=20, workers=64)
    (entry,) = sweep.errors
    assert list(entry) == ["rep", "config", "workers", "error", "traceback"]
    assert entry["error"] == "ValueError: " + "x" * 8
    assert "raise ValueError" in entry["traceback"]


def test_alternating_is_abba_over_rounds() -> None:
    from asynciocomm_bench.common.sweep import alternating

    rounds = [alternating(("a", "b", "c"), i) for i in range(4)]
    assert rounds == [["a", "b", "c"], ["c", "b", "a"], ["a", "b", "c"], ["c", "b", "a"]]
    firsts = [r[0] for r in rounds]
    assert firsts.count("a") == firsts.count("c") == 2

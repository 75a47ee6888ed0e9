"""The scheduler-side probe of ``gc``: what it counts, how it names the makers of
cycles, and that it leaves the collector as it found it."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from asynciocomm_bench.gc import metrics, probe


class _Node:
    def __init__(self) -> None:
        self.me = self


def _failing_callee() -> None:
    raise ValueError("kept")


def _keeps_its_exception() -> None:
    """The cycle the project's rule names: an exception kept in a local of the
    frame that handled it (exception -> traceback -> frame -> exception)."""
    try:
        _failing_callee()
    except ValueError as exc:
        kept = exc  # noqa: F841


@pytest.fixture(autouse=True)
def _restore_gc() -> Any:
    debug, callbacks = gc.get_debug(), list(gc.callbacks)
    yield
    assert gc.get_debug() == debug
    assert gc.callbacks == callbacks
    assert not gc.garbage


def test_timing_counts_collections_and_freed_objects() -> None:
    probe.start()
    for _ in range(100):
        _Node()
    gc.collect()
    out = probe.stop()
    assert out["collections"][2] >= 1
    assert out["collected"] >= 100
    assert out["gc_cpu_s"] > 0 and out["longest_s"] > 0
    assert out["attribution"] is False


def test_attribution_names_the_frames_of_a_kept_exception() -> None:
    probe.start(attribution=True)
    for _ in range(5):
        _keeps_its_exception()
    for _ in range(7):
        _Node()
    out = probe.stop()
    kinds = {k["creator"]: k for k in out["kinds"]}
    exc = [k for who, k in kinds.items() if who.startswith("ValueError: ")]
    assert len(exc) == 1, kinds
    who = exc[0]["creator"]
    assert who.index("_keeps_its_exception") < who.index("_failing_callee"), who
    assert exc[0]["cycles"] == 5
    assert out["exceptions"] == {"ValueError": 5}
    nodes = [k for k in out["kinds"] if k["types"].get("_Node")]
    assert sum(k["cycles"] for k in nodes) == 7
    assert out["cyclic_objects"] >= 5 * 4 + 7


def test_attribution_frees_what_it_held() -> None:
    def nodes() -> int:
        return sum(isinstance(o, _Node) for o in gc.get_objects())

    before = nodes()
    probe.start(attribution=True)
    _Node()
    gc.collect()  # found, but held by the probe instead of freed
    assert nodes() == before + 1
    probe.stop()
    assert nodes() == before


def test_stop_without_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="without start"):
        probe.stop()


def test_values_per_thousand_tasks() -> None:
    timing = {"collections": [30, 3, 1], "collected": 9000, "gc_cpu_s": 0.05,
              "gc_wall_s": 0.06, "longest_s": 0.02, "process_cpu_s": 1.0,
              "batches": 0, "messages": 0}
    attrib = {"cyclic_objects": 44_000, "exceptions": {"TimeoutError": 2000},
              "batches": 1600, "messages": 5000,
              "kinds": [{"creator": "TimeoutError: distributed.batched.BatchedSend."
                         "_background_send > tornado.gen.Runner.run",
                         "cycles": 2000, "objects": 44_000, "types": {}}]}
    v = metrics.values(timing, attrib, tasks=2000)
    assert v["cyclic_objects"] == 22_000
    assert v["gc_cpu_ms"] == pytest.approx(25.0)
    assert v["gc_share"] == pytest.approx(5.0)
    assert (v["gen0"], v["gen1"], v["gen2"]) == (15, 1.5, 0.5)
    assert v["timeouts_per_batch"] == pytest.approx(1.25)
    assert v["batched_share"] == 100.0
    assert v["pause_max_ms"] == pytest.approx(20.0)

"""Fixtures of the bench tests. Every async test runs on both event loops, each
made through distributed's own ``distributed.admin.event-loop`` setting (no loop
policy is installed), which stays in force while the test runs."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest

from asynciocomm_bench.common.loops import EVENT_LOOP_KEY, loop_factory

DATA = Path(__file__).parent / "data"
#: uvloop where it is installed (not on Windows), the asyncio loop everywhere.
LOOPS = ("asyncio", "uvloop") if importlib.util.find_spec("uvloop") else ("asyncio",)


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict:
    return {name: loop_factory(name) for name in LOOPS}


@pytest.fixture(autouse=True)
def _loop_setting(request: pytest.FixtureRequest) -> Iterator[None]:
    """distributed's setting names the test's loop while it runs."""
    callspec = getattr(request.node, "callspec", None)
    factory = callspec.params.get("_asyncio_loop_factory") if callspec else None
    name = getattr(factory, "loop_name", None)
    if name is None:
        yield
        return
    with dask.config.set({EVENT_LOOP_KEY: name}):
        yield


@pytest.fixture
def speedscope_file() -> Path:
    """A speedscope file written by a real ``py-spy record --native --idle`` run
    on a scheduler during the wide workload (tcp, asyncio loop)."""
    return DATA / "speedscope-scheduler-tcp.json"


def _section(metric: str, title: str, values: dict[str, list[float]],
             higher: bool = True) -> dict[str, Any]:
    """A section with one metric; configurations are labelled scheme@loop."""
    from asynciocomm_bench.common.stats import summarize

    metrics = {metric: {"title": title, "unit": "op/s", "higher_is_better": higher}}
    samples = [{"rep": rep, "config": cfg, "metric": metric, "value": v}
               for cfg, vals in values.items() for rep, v in enumerate(vals)]
    configs = list(values)
    peers = {c: f"tcp@{c.split('@')[1]}" for c in configs if not c.startswith("tcp@")}
    return {
        "configs": [{"label": c, "scheme": c.split("@")[0], "loop": c.split("@")[1]}
                    for c in configs],
        "reference": configs[0],
        "same_loop_refs": peers,
        "metrics": metrics,
        "samples": samples,
        "summary": summarize(samples, metrics, configs[0], peers),
        "loop_classes": {c: {"server": "uvloop.Loop"} for c in configs},
        "reps_done": max(len(v) for v in values.values()),
        "errors": [],
    }


@pytest.fixture
def tiny_doc() -> dict[str, Any]:
    """A small, valid result document with comm, cluster and profile sections. In
    comm, asyncio@uvloop beats tcp@uvloop 3, 2 and 2.5 times over 3 repetitions;
    in cluster, asyncio@asyncio halves tcp@asyncio's wall time, over 2 repetitions
    only."""
    from asynciocomm_bench.common.results import new_document

    doc = new_document("smoke", ["comm", "--size", "smoke"])
    doc["comm"] = _section("ping_rts", "a metric",
                           {"tcp@uvloop": [100.0, 200.0, 100.0],
                            "asyncio@uvloop": [300.0, 400.0, 250.0]})
    doc["cluster"] = _section("wide_gc_on_wall_s", "wide wall",
                              {"tcp@asyncio": [10.0, 10.0],
                               "asyncio@asyncio": [5.0, 5.0]}, higher=False)
    doc["profile"] = {"runs": [{
        "config": "tcp@uvloop", "gc": True, "speedscope": "speedscope-x.json",
        "samples": 10, "shares": {"comm read": 0.25, "transitions": 0.5, "idle": 0.25},
        "update_graph_parts": {"new tasks": 0.1},
        "overhead": {"wall_ratio": 1.1, "cpu_ratio": 1.2},
    }]}
    return doc

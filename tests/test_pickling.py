"""asynciocomm.pickling: distributed's pickle.dumps, its bytes, buffers, logs and
errors, with every pickler run as often as there and no more often."""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable
from typing import Any

import cloudpickle
import numpy as np
import pytest
from dask._task_spec import Task
from distributed.protocol.pickle import dumps
from hypothesis import given, settings
from hypothesis import strategies as st

from asynciocomm.pickling import pickle_dumps
from tests import certs
from tests.helpers_pickles import Counted, Pickles, main_class


def _run(fn: Callable[..., bytes], x: Any) -> tuple[Any, list[bytes], int]:
    """(bytes or exception type, out-of-band buffers, pickles of counted objects)."""
    buffers: list[Any] = []
    start = Pickles.n
    try:
        out: Any = fn(x, buffer_callback=buffers.append)
    except Exception as e:
        out = type(e)
    return out, [bytes(b) for b in buffers], Pickles.n - start


def _ours(x: Any, buffer_callback: Callable[[Any], Any]) -> bytes:
    result, buffers = pickle_dumps(x)
    for b in buffers:
        buffer_callback(b)
    return result


#: What each branch of distributed's function takes, made afresh per example.
OBJECTS: list[Callable[[type], Any]] = [
    lambda main: 3,
    lambda main: Task(("x", 1), operator.add, 1, 2),
    lambda main: Counted(1, "a"),
    lambda main: main(1),  # pickle, then cloudpickle: a class of a script
    lambda main: [main(1), Counted(2)],
    lambda main: Counted(lambda: 1),  # pickle and _DaskPickler fail, cloudpickle works
    lambda main: main(lambda: 1),
    lambda main: Counted(np.arange(1000)),  # an out-of-band buffer
    lambda main: main(np.arange(1000)),
    lambda main: np.array([main(1)] * 300, dtype=object),  # __main__ in an array of 1000+ bytes: pickle's
    lambda main: np.array([main(1)], dtype=object),  # and a short one: cloudpickle's
    lambda main: Counted(threading.Lock()),  # nothing can pickle it
    lambda main: lambda: 2,
]


@pytest.mark.parametrize("make", OBJECTS, ids=range(len(OBJECTS)))
def test_each_branch_is_distributeds(make) -> None:
    with main_class() as main:
        ours = _run(_ours, make(main))
        theirs = _run(dumps, make(main))
    assert ours == theirs


def test_a_class_of_a_script_is_pickled_twice_not_three_times() -> None:
    with main_class() as main:
        x = main(1)
        assert _run(_ours, x)[2] == 2  # pickle.dumps (with __main__ in it), cloudpickle.dumps


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(range(len(OBJECTS) - 2)), min_size=1, max_size=4))
def test_nested_objects_are_distributeds(picks: list[int]) -> None:
    with main_class() as main:
        ours = _run(_ours, [OBJECTS[i](main) for i in picks])
        theirs = _run(dumps, [OBJECTS[i](main) for i in picks])
    assert ours == theirs


def test_the_pickle_by_value_registry_is_followed() -> None:
    by_reference = _run(_ours, certs._name)
    cloudpickle.register_pickle_by_value(certs)
    try:
        assert _run(_ours, certs._name) == _run(dumps, certs._name) != by_reference
    finally:
        cloudpickle.unregister_pickle_by_value(certs)


def test_a_failure_logs_and_raises_as_distributed(caplog) -> None:
    records = []
    for fn in (_ours, dumps):
        caplog.clear()
        with pytest.raises(TypeError):
            fn(Counted(threading.Lock()), buffer_callback=[].append)
        records.append([(r.name, r.levelname, r.getMessage()[:40]) for r in caplog.records])
    assert records[0] == records[1]
    assert records[0] and records[0][0][:2] == ("distributed.protocol.pickle", "ERROR")

"""asynciocomm.serialization.pickling: distributed's pickle.dumps, its bytes, buffers, logs and
errors, with every pickler run as often as there and no more often, and only
cloudpickle run on a task whose function distributed certainly pickles by value."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copyreg
import functools
import operator
import pickle
import sys
import threading
from collections.abc import Callable
from typing import Any

import cloudpickle
import numpy as np
import pytest
from dask._task_spec import GraphNode, Task, TaskRef
from distributed.protocol.pickle import _DaskPickler, dumps
from distributed.protocol.serialize import dask_deserialize, dask_serialize
from hypothesis import given, settings
from hypothesis import strategies as st

from asynciocomm.serialization import internals
from asynciocomm.serialization.pickling import by_value, pickle_dumps
from tests import certs, helpers_pickles
from tests.helpers_pickles import Counted, Dasked, Pickles, local_function, main_class


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
    # __main__ in an array of 1000+ bytes: pickle's
    lambda main: np.array([main(1)] * 300, dtype=object),
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


# --- tasks whose function is pickled by value: only cloudpickle runs -----------

def _main_function(resolvable: bool) -> Callable[..., Any]:
    """A function of ``__main__``: one a script defines (found there while the
    test runs, see :func:`_in_main`) or a script's lambda (never found)."""
    fn = local_function()
    fn.__module__ = "__main__"
    fn.__qualname__ = "w18_main_function" if resolvable else "<lambda>"
    return fn


def _unimported_function() -> Callable[..., Any]:
    fn = local_function()
    fn.__module__ = "no_such_module_w18"
    fn.__qualname__ = "inc"
    return fn


#: A task's function: by value (local, lambdas, ``__main__``) or by reference.
FUNCTIONS: list[Callable[[], Any]] = [
    local_function,
    lambda: (lambda x: x),
    lambda: helpers_pickles.lam,  # <lambda> of an importable module
    lambda: helpers_pickles.f,  # by reference
    lambda: operator.add,  # a builtin
    lambda: _main_function(True),
    lambda: _main_function(False),
    _unimported_function,  # pickle's import fails
    lambda: functools.partial(local_function(), 1),  # not a plain function: no skip
]

#: A task's argument, made afresh for each pickler (``main``: a class of ``__main__``).
ARGUMENTS: list[Callable[[type], Any]] = [
    lambda main: 1,
    lambda main: "a",
    lambda main: Counted(1),
    lambda main: main(2),
    lambda main: np.arange(1000),  # an out-of-band buffer
    lambda main: Dasked(3),  # pickle fails, _DaskPickler and cloudpickle differ
    lambda main: memoryview(b"ab"),  # pickle fails, _DaskPickler and cloudpickle take it
    lambda main: threading.Lock(),  # nothing pickles it
    lambda main: TaskRef("k"),
    lambda main: Task("inner", local_function(), 1),
]


@contextlib.contextmanager
def _in_main(fn: Any) -> Any:
    """``__main__.w18_main_function`` is ``fn`` while the block runs."""
    main = sys.modules["__main__"]
    main.w18_main_function = fn  # type: ignore[attr-defined]
    try:
        yield
    finally:
        del main.w18_main_function  # type: ignore[attr-defined]


def _task(fn: Any, args: list[int], kwarg: int | None, main: type) -> Task:
    kwargs = {} if kwarg is None else {"k": ARGUMENTS[kwarg](main)}
    return Task(("t", 1), fn, *(ARGUMENTS[i](main) for i in args), **kwargs)


def _compare(make: Callable[[], Any]) -> tuple[Any, Any]:
    """(ours, distributed's) of what ``make()`` builds afresh for each: the bytes
    or error type, the buffers; where the pickling succeeds, ours pickles
    counted objects no more often (a failed cloudpickle runs distributed's steps)."""
    ours, theirs = _run(_ours, make()), _run(dumps, make())
    assert ours[2] <= theirs[2] or isinstance(ours[0], type)
    return ours[:2], theirs[:2]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.sampled_from(range(len(FUNCTIONS))),
       st.lists(st.sampled_from(range(len(ARGUMENTS))), max_size=3),
       st.none() | st.sampled_from(range(len(ARGUMENTS))),
       st.booleans())
def test_tasks_are_distributeds(fn: int, args: list[int], kwarg: int | None,
                                listed: bool) -> None:
    func = FUNCTIONS[fn]()
    with main_class() as main, _in_main(func):
        def make() -> Any:
            task = _task(func, args, kwarg, main)
            return [task, 1] if listed else task

        ours, theirs = _compare(make)
    assert ours == theirs


@pytest.mark.parametrize("fn, expected", [
    (0, True), (1, True), (2, True), (3, False), (4, False), (5, True), (6, True),
    (7, False), (8, False)])
def test_which_tasks_skip_to_cloudpickle(fn: int, expected: bool) -> None:
    func = FUNCTIONS[fn]()
    with _in_main(func):
        assert by_value(Task("t", func, 1)) is expected
        assert not by_value([Task("t", func, 1)])  # only a task itself


#: Whether pickle reaches a task's arguments before its function: where dask
#: defines ``Task.__getstate__`` (sorted slots, ``args`` first; from dask 2025.3.0).
#: With object's own slot state (dask 2024.12) ``func`` comes first, so
#: distributed's failing attempts stop before the arguments, and the shortcut,
#: still taken, saves only those attempts.
ARGS_FIRST = (getattr(Task, "__getstate__", None)  # object has none before CPython 3.11
              is not getattr(object, "__getstate__", None))


def test_a_local_function_is_pickled_by_cloudpickle_alone() -> None:
    """distributed pickles the arguments three times (once where the function
    comes first), here once."""
    make = lambda: Task("t", local_function(), Counted(1))  # noqa: E731
    assert by_value(make())
    assert [_run(fn, make())[2] for fn in (_ours, dumps)] == [1, 3 if ARGS_FIRST else 1]


def test_a_function_made_importable_is_pickled_by_reference() -> None:
    fn = local_function()
    task = Task("t", fn, 1)
    first = _run(_ours, task)
    assert first == _run(dumps, task)
    fn.__qualname__ = "made_importable"
    fn.__module__ = helpers_pickles.__name__
    helpers_pickles.made_importable = fn  # type: ignore[attr-defined]
    try:
        assert not by_value(task)
        second = _run(_ours, task)
        assert second == _run(dumps, task) != first
        assert second[0] == pickle.dumps(task, protocol=5)  # by reference, as distributed
    finally:
        del helpers_pickles.made_importable  # type: ignore[attr-defined]


def test_a_module_lambda_made_findable_is_pickled_by_reference() -> None:
    task = Task("t", helpers_pickles.lam, 1)
    assert by_value(task)
    setattr(helpers_pickles, "<lambda>", helpers_pickles.lam)
    try:
        assert not by_value(task)
        assert _run(_ours, task) == _run(dumps, task)
        assert _run(_ours, task)[0] == pickle.dumps(task, protocol=5)
    finally:
        delattr(helpers_pickles, "<lambda>")


@contextlib.contextmanager
def _dispatch_restored() -> Any:
    """dask's serializer registries as they were, after the block (dispatch caches too)."""
    saved = [(d, dict(d._lookup), dict(d._lazy)) for d in (dask_serialize, dask_deserialize)]
    try:
        yield
    finally:
        for d, lookup, lazy in saved:
            d._lookup.clear()
            d._lookup.update(lookup)
            d._lazy.clear()
            d._lazy.update(lazy)


def _register(cls: type) -> None:
    dask_serialize.register(cls)(helpers_pickles.dask_dumps)
    dask_deserialize.register(cls)(helpers_pickles.DaskLoaded)


#: ``object``'s serializer changes nothing: _DaskPickler reduces the deserializer
#: with it too, again and again, and ends in cloudpickle.
@pytest.mark.parametrize("cls", [type(local_function()), Task, GraphNode, object])
@pytest.mark.parametrize("lazy", [False, True], ids=["registered", "lazy"])
def test_a_dask_serializer_registered_later_is_followed(cls: type, lazy: bool) -> None:
    make = lambda: Task("t", local_function(), 1)  # noqa: E731
    before = _compare(make)
    with _dispatch_restored():
        if lazy:
            toplevel = cls.__module__.partition(".")[0]
            dask_serialize.register_lazy(toplevel)(lambda: _register(cls))
        else:
            _register(cls)
        ours, theirs = _compare(make)
    assert ours == theirs
    assert (theirs == before[1]) is (cls is object)


def test_a_copyreg_reducer_of_tasks_is_followed() -> None:
    """pickle takes the reducer, which leaves the function out; so does
    cloudpickle, but it pickles a class of a module registered by value by value."""
    make = lambda: Task("t", local_function(), 1)  # noqa: E731
    copyreg.pickle(Task, lambda t: (helpers_pickles.DaskLoaded, ({"what": t.key}, [])))
    cloudpickle.register_pickle_by_value(helpers_pickles)
    try:
        ours, theirs = _compare(make)
    finally:
        cloudpickle.unregister_pickle_by_value(helpers_pickles)
        del copyreg.dispatch_table[Task]
    assert ours == theirs and b"tests.helpers_pickles\x94\x8c\nDaskLoaded\x94\x93" in ours[0]


def _state_without_function(task: Task) -> tuple[Any, ...]:
    return tuple(helpers_pickles.DaskLoaded if s == "func" else getattr(task, s)
                 for s in internals.slots(Task))


def _reduce_functions(pickler: Any, obj: Any) -> Any:
    if isinstance(obj, type(local_function())) and obj.__module__ != "copyreg":
        return helpers_pickles.DaskLoaded, ({"what": obj.__qualname__}, [])
    return NotImplemented


@pytest.mark.parametrize("cls, name, replacement", [
    (Task, "__getstate__", _state_without_function),
    (Task, "__reduce__", lambda task: (helpers_pickles.DaskLoaded, ({"what": task.key}, []))),
    (_DaskPickler, "reducer_override", _reduce_functions)], ids=["getstate", "reduce", "hook"])
def test_a_task_pickled_otherwise_is_followed(monkeypatch, cls: type, name: str,
                                              replacement: Any) -> None:
    make = lambda: Task("t", local_function(), 1)  # noqa: E731
    before = _compare(make)[1]
    # raising=False: before CPython 3.11 Task has no __getstate__ to replace; one
    # added there changes the pickle just as much.
    monkeypatch.setattr(cls, name, replacement, raising=False)
    cloudpickle.register_pickle_by_value(helpers_pickles)  # cloudpickle's result differs
    try:
        ours, theirs = _compare(make)
    finally:
        cloudpickle.unregister_pickle_by_value(helpers_pickles)
    assert ours == theirs != before


def test_a_copyreg_extension_code_for_a_main_function_is_followed() -> None:
    func = _main_function(True)
    copyreg.add_extension("__main__", "w18_main_function", 0x7FFF_FF00)
    try:
        with _in_main(func):
            ours, theirs = _compare(lambda: Task("t", func, 1))
    finally:
        copyreg.remove_extension("__main__", "w18_main_function", 0x7FFF_FF00)
    assert ours == theirs and b"__main__" not in ours[0]


def test_a_replaced_import_is_left_to_pickle() -> None:
    """A lambda of a module is judged by looking it up there only while pickle
    would import that module with Python's own ``__import__``."""
    real = builtins.__import__
    builtins.__import__ = lambda *a, **k: real(*a, **k)
    try:
        assert not by_value(Task("t", helpers_pickles.lam, 1))
        assert by_value(Task("t", local_function(), 1))
        ours, theirs = _compare(lambda: Task("t", helpers_pickles.lam, 1))
    finally:
        builtins.__import__ = real
    assert ours == theirs


@pytest.mark.parametrize("fn", [0, 2, 3])
def test_the_pickle_by_value_registry_is_followed_for_tasks(fn: int) -> None:
    func = FUNCTIONS[fn]()
    cloudpickle.register_pickle_by_value(helpers_pickles)
    try:
        ours, theirs = _compare(lambda: Task("t", func, 1))
    finally:
        cloudpickle.unregister_pickle_by_value(helpers_pickles)
    assert ours == theirs


@pytest.mark.parametrize("fn", [0, 5])
@pytest.mark.parametrize("where", ["args", "kwargs"])
def test_a_task_that_fails_logs_and_raises_as_distributed(caplog, fn: int, where: str) -> None:
    lock = 7  # threading.Lock()
    records = []
    for dump in (_ours, dumps):
        caplog.clear()
        func = FUNCTIONS[fn]()
        with main_class() as main, _in_main(func), pytest.raises(TypeError) as info:
            task = _task(func, [lock] if where == "args" else [], lock if where == "kwargs"
                         else None, main)
            dump(task, buffer_callback=[].append)
        chain = [type(info.value), type(info.value.__context__)]
        records.append((chain, [(r.name, r.levelname, r.getMessage()[:60], r.exc_info[0])
                                for r in caplog.records]))
    assert records[0] == records[1]
    assert records[0][1] and records[0][1][0][:2] == ("distributed.protocol.pickle", "ERROR")


async def _scheduler_pickles(protocol: str) -> int:
    """Pickles of a counted argument while a task of a local function runs."""
    from distributed import Client, LocalCluster

    total = lambda c: c.total()  # noqa: E731  (pickled by value, as a user's lambda)
    async with LocalCluster(protocol=protocol, n_workers=1, threads_per_worker=1,
                            processes=False, dashboard_address=":0",
                            asynchronous=True) as cluster:
        async with Client(cluster, asynchronous=True) as client:
            start = Pickles.n
            assert await asyncio.wait_for(client.submit(total, Counted(3)), 30) == 3
            return Pickles.n - start


async def test_the_scheduler_pickles_a_task_of_a_lambda_with_cloudpickle_alone() -> None:
    """Its compute-task: pickle, _DaskPickler and cloudpickle over the stock
    comm, cloudpickle alone over asynciocomm (the client's pickles are the same)."""
    theirs = await _scheduler_pickles("tcp")
    ours = await _scheduler_pickles("asyncio")
    assert ours == theirs - (2 if ARGS_FIRST else 0)

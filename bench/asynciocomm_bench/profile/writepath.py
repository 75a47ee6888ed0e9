"""CPU per ``compute-task`` message at the scheduler's write path, by pickling step.

    python -m asynciocomm_bench.profile.writepath [--messages 2000] [--reps 9] [--json FILE]

The messages are the scheduler's ``compute-task`` (``Scheduler._task_to_msg``'s
keys) of the scale bench's ``map``: ``client.map(inc, range(n))`` with ``inc``
defined in the calling function, so that distributed pickles it by value. Each
row is the process CPU time (``time.process_time``) of one pass over the
messages divided by their number, best and median of ``--reps`` passes:

- ``pickle.dumps (fails)``, ``_DaskPickler (fails)``, ``cloudpickle.dumps``: the
  three attempts of ``distributed.protocol.pickle.dumps`` on a task spec;
- ``cloudpickle, by-reference function``: the same task with a module function,
  so that the difference to ``cloudpickle.dumps`` bounds what reusing the
  function's cloudpickle in every message could save at most;
- ``distributed pickle.dumps`` and ``asynciocomm pickle_dumps`` with and without
  the skip of :func:`asynciocomm.serialization.pickling.by_value`;
- the whole message: ``distributed.protocol.dumps`` (the stock comm) and
  ``MessageCodec.dumps`` (asynciocomm), with and without the skip;
- what the message costs besides pickling: ``MessageCodec.dumps`` of it
  without its ``run_spec``, and the msgpack sub-header of each ``ToPickle``.

Every variant's bytes are checked against distributed's before it is timed.
The machine's load is in the figures: compare rows of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pickle
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import cloudpickle
import msgpack
from dask._task_spec import Task
from distributed.protocol import dumps as distributed_dumps
from distributed.protocol.pickle import _DaskPickler
from distributed.protocol.pickle import dumps as distributed_pickle
from distributed.protocol.serialize import ToPickle

from asynciocomm.serialization import pickling
from asynciocomm.serialization.fast import MessageCodec


def local_inc() -> Callable[[int], int]:
    """``inc`` as the scale bench defines it: local, pickled by value."""

    def inc(x: int) -> int:
        return x + 1

    return inc


def module_inc(x: int) -> int:
    """``inc`` of a module: pickled by reference."""
    return x + 1


def message(task: Task, i: int) -> dict[str, Any]:
    """A ``compute-task`` as ``Scheduler._task_to_msg`` builds it."""
    return {"op": "compute-task", "key": task.key, "run_id": i, "priority": (0, 1, i),
            "stimulus_id": f"compute-task-{1764647100.0 + i}", "who_has": {}, "nbytes": {},
            "run_spec": ToPickle(task), "resource_restrictions": {}, "actor": False,
            "annotations": {}, "span_id": "6c8e1e0c-ca0c-4bd4-8a5d-6c7d6f0e5c11"}


def _attempt(fn: Callable[[Any], Any]) -> Callable[[Any], None]:
    def run(x: Any) -> None:
        try:
            fn(x)
        except Exception:
            pass

    return run


def _dask_pickler(x: Any) -> None:
    _DaskPickler(io.BytesIO(), protocol=5, buffer_callback=[].append).dump(x)


def _sub_header(pickled: bytes) -> bytes:
    """The sub-header asynciocomm.serialization.packing writes for each ToPickle, as distributed."""
    return msgpack.dumps({"pickled-obj": pickled, "compression": (), "num-sub-frames": 0})


@contextlib.contextmanager
def _skip(on: bool) -> Iterator[None]:
    """With ``on`` false, :func:`asynciocomm.serialization.pickling.by_value` answers no while
    the block runs: main's path (pickle, _DaskPickler, cloudpickle)."""
    saved = pickling.by_value
    if not on:
        pickling.by_value = lambda x: False
    try:
        yield
    finally:
        pickling.by_value = saved


def _time(fn: Callable[[Any], Any], items: list[Any], reps: int, skip: bool) -> tuple[float, float]:
    """(best, median) µs of CPU per item over ``reps`` passes."""
    per = []
    with _skip(skip):
        for _ in range(reps):
            start = time.process_time()
            for x in items:
                fn(x)
            per.append((time.process_time() - start) / len(items) * 1e6)
    return min(per), statistics.median(per)


def run(messages: int, reps: int) -> dict[str, tuple[float, float]]:
    """The table: row name -> (best, median) µs per message."""
    inc = local_inc()
    specs = [Task(("inc-5c1e", i), inc, i) for i in range(messages)]
    from asynciocomm_bench.profile import (
        writepath,  # by its name: under -m, this module is __main__
    )

    by_ref = [Task(("inc-5c1e", i), writepath.module_inc, i) for i in range(messages)]
    msgs = [message(t, i) for i, t in enumerate(specs)]
    codec = MessageCodec()
    ours = lambda x: pickling.pickle_dumps(x)[0]  # noqa: E731
    stock = lambda x: distributed_pickle(x, buffer_callback=[].append)  # noqa: E731
    if not pickling.by_value(specs[0]):
        raise RuntimeError("the local function's task does not skip to cloudpickle")
    for skip in (True, False):
        with _skip(skip):
            if ([ours(t) for t in specs[:50]] != [stock(t) for t in specs[:50]]
                    or [codec.dumps(m) for m in msgs[:50]] != [distributed_dumps(m)
                                                               for m in msgs[:50]]):
                raise RuntimeError(f"bytes unlike distributed's (skip {skip})")
    dumps5 = lambda x: cloudpickle.dumps(x, protocol=5)  # noqa: E731
    bare = [{k: v for k, v in m.items() if k != "run_spec"} for m in msgs]
    pickles = [ours(t) for t in specs]
    rows: list[tuple[str, Callable[[Any], Any], list[Any], bool]] = [
        ("pickle.dumps (fails)", _attempt(lambda x: pickle.dumps(x, protocol=5)), specs, True),
        ("_DaskPickler (fails)", _attempt(_dask_pickler), specs, True),
        ("cloudpickle.dumps", dumps5, specs, True),
        ("cloudpickle, by-reference function", dumps5, by_ref, True),
        ("distributed pickle.dumps", stock, specs, True),
        ("asynciocomm pickle_dumps, no skip (main)", ours, specs, False),
        ("asynciocomm pickle_dumps", ours, specs, True),
        ("by_value() test alone", pickling.by_value, specs, True),
        ("message: distributed.protocol.dumps (stock)", distributed_dumps, msgs, True),
        ("message: MessageCodec.dumps, no skip (main)", codec.dumps, msgs, False),
        ("message: MessageCodec.dumps", codec.dumps, msgs, True),
        ("message without run_spec: MessageCodec.dumps", codec.dumps, bare, True),
        ("ToPickle sub-header: msgpack.dumps", _sub_header, pickles, True),
    ]
    return {name: _time(fn, items, reps, skip) for name, fn, items, skip in rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=2000)
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--json", default=None, help="also write the table as JSON here")
    args = p.parse_args(argv)
    if not 1 <= args.messages <= 100_000 or not 1 <= args.reps <= 100:
        p.error("--messages 1..100000, --reps 1..100")
    table = run(args.messages, args.reps)
    print(f"{'µs CPU per message':46} {'best':>7} {'median':>7}")
    for name, (best, med) in table.items():
        print(f"{name:46} {best:7.2f} {med:7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"messages": args.messages, "reps": args.reps, "python": sys.version,
                       "rows": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

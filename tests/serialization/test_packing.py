"""asynciocomm.serialization.packing, through MessageCodec: a message is written with the
frames, errors and logs of distributed's ``to_frames``, and nothing in it is
pickled or serialized more often than there, whatever path it takes (the fast
one, distributed's second pass, a failure, an offload begun on the loop)."""

from __future__ import annotations

import asyncio
import logging
import pickle
import threading
from collections.abc import Callable, Iterator
from typing import Any

import distributed.comm.utils
import numpy as np
import pytest
from distributed.comm.utils import to_frames
from distributed.protocol import to_serialize
from distributed.protocol.serialize import Pickled, Serialized, ToPickle, serialize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asynciocomm.serialization.continuation import Continuation
from asynciocomm.serialization.fast import MessageCodec
from tests.helpers_pickles import Counted, Pickles, main_class
from tests.serialization.test_fast import _Comm, _frame_bytes

#: Parts of a message, each made afresh: (the class of a script, a number).
PARTS: dict[str, Callable[[type, int], Any]] = {
    "topickle": lambda main, i: ToPickle(Counted(i)),
    "topickle-of-a-script": lambda main, i: ToPickle(main(i)),
    "topickle-lambda": lambda main, i: ToPickle(Counted(lambda: i)),
    "topickle-buffers": lambda main, i: ToPickle(Counted(np.zeros(20_000 + i))),
    "unpicklable": lambda main, i: ToPickle(Counted(threading.Lock())),
    "raw-object": lambda main, i: Counted(i),  # msgpack refuses it: the second pass
    "serialize-array": lambda main, i: to_serialize(np.arange(i + 1)),
    "serialize-counted": lambda main, i: to_serialize(Counted(i)),  # the pickle family
    "serialized": lambda main, i: Serialized(*serialize(b"x" * i)),
    "pickled": lambda main, i: Pickled({"pickled-obj": pickle.dumps(i)}, []),
    "set": lambda main, i: {i, -i},
    "plain": lambda main, i: [i, "s", b"b"],
}


@pytest.fixture
def main() -> Iterator[type]:
    with main_class() as cls:
        yield cls


def _build(names: list[str], nest: bool, main: type) -> dict[str, Any]:
    parts = [PARTS[n](main, i) for i, n in enumerate(names)]
    msg: dict[str, Any] = {"op": "test"}
    if nest:
        msg["nested"] = [{"p": p} for p in parts]
    else:
        msg.update({f"k{i}": p for i, p in enumerate(parts)})
    return msg


async def _ours(msg: Any, comm: _Comm) -> list[bytes]:
    codec = MessageCodec()
    frames = codec.dumps(msg, comm)
    if isinstance(frames, Continuation):
        frames = await frames
    return _frame_bytes(frames)


async def _stock(msg: Any, comm: _Comm) -> list[bytes]:
    frames = await to_frames(msg, allow_offload=comm.allow_offload, context=comm.context(),
                             frame_split_size=comm.max_shard_size)
    return _frame_bytes(frames)


def _outcome(write: Callable[..., Any], msg: Any, comm: _Comm, caplog) -> tuple[Any, int, list]:
    """(frames or the error, pickles of counted objects, log records)."""
    caplog.clear()
    start = Pickles.n
    loop = asyncio.new_event_loop()
    try:
        out: Any = loop.run_until_complete(write(msg, comm))
    except Exception as e:
        out = (type(e), str(e))
    finally:
        loop.close()
    records = [(r.name, r.levelname, r.getMessage()[:60]) for r in caplog.records]
    return out, Pickles.n - start, records


def _compare(names: list[str], nest: bool, main: type, threshold: Any, compression: Any,
             caplog) -> tuple[Any, int, list]:
    comm = _Comm(compression)
    saved = distributed.comm.utils.OFFLOAD_THRESHOLD
    if threshold is not None:
        distributed.comm.utils.OFFLOAD_THRESHOLD = threshold
    try:
        ours = _outcome(_ours, _build(names, nest, main), comm, caplog)
        theirs = _outcome(_stock, _build(names, nest, main), comm, caplog)
    finally:
        distributed.comm.utils.OFFLOAD_THRESHOLD = saved
    assert ours == theirs
    return ours


CASES = [
    # The submit path's compute-task: a class of a script, pickle then cloudpickle.
    (["topickle-of-a-script"], 2),
    (["topickle-buffers"], 1),  # out-of-band buffers, compressed with the comm's
    (["topickle-lambda"], 3),  # pickle, _DaskPickler, cloudpickle
    (["topickle", "raw-object"], 3),  # pass 1, then pass 2 pickles both
    (["topickle", "unpicklable"], 2 + 6),  # three picklers, twice; then the error
    (["pickled", "topickle", "serialize-counted"], 1 + 1),
]


@pytest.mark.parametrize("threshold", [None, 1], ids=["default-threshold", "threshold-1"])
@pytest.mark.parametrize(("names", "pickles"), CASES, ids=[",".join(c[0]) for c in CASES])
def test_pickled_as_often_as_by_to_frames(names, pickles, threshold, main, caplog) -> None:
    caplog.set_level(logging.INFO, logger="distributed")
    _, n, _ = _compare(names, False, main, threshold, "zlib", caplog)
    assert n == pickles


def test_an_offload_begun_on_the_loop_pickles_nothing_again(main, caplog) -> None:
    """A ToPickle before the first Serialize is pickled on the loop before the
    offload rule is known; the offloaded rest takes its sub-frames as they are."""
    caplog.set_level(logging.INFO, logger="distributed")
    names = ["topickle-of-a-script", "topickle-buffers", "pickled", "serialized", "set",
             "serialize-array"]
    _, n, _ = _compare(names, False, main, 1, "zlib", caplog)
    assert n == 2 + 1
    # ... and after distributed's second pass.
    _, n, _ = _compare(["topickle", "raw-object", "serialize-counted"], False, main, 1, None,
                       caplog)
    assert n == 2 + 1 + 1


def test_copy_free_arrays_stay_on_the_loop_and_the_rest_is_offloaded(main, caplog,
                                                                    monkeypatch) -> None:
    """Over the threshold, copy-free arrays are serialized on the loop; the first
    other Serialize before they bring the message below it sends the rest to
    the offload thread, which takes the arrays' sub-frames as they are. Frames,
    pickles and logs are to_frames'; each Serialize is serialized once."""
    import asynciocomm.serialization.packing as packing

    calls: list[Any] = []
    split = packing.split_serialized

    def counted(obj: Any, **kwargs: Any) -> Any:
        calls.append(threading.current_thread() is threading.main_thread())
        return split(obj, **kwargs)

    monkeypatch.setattr(packing, "split_serialized", counted)
    caplog.set_level(logging.INFO, logger="distributed")
    names = ["serialize-array", "serialize-counted", "serialize-array"]
    codec = MessageCodec()
    # the threshold not met
    assert not isinstance(codec.dumps(_build(names, False, main), _Comm()), Continuation)
    assert calls == [True, True, True]
    calls.clear()
    _, n, _ = _compare(names, False, main, 1, None, caplog)
    assert n == 1
    # the first array on the loop, then the rest in the offload thread, once
    assert calls == [True, False, False]


def test_failures_log_and_raise_as_to_frames_does(main, caplog) -> None:
    caplog.set_level(logging.INFO, logger="distributed")
    out, _, records = _compare(["topickle", "unpicklable"], False, main, None, None, caplog)
    assert out[0] is TypeError
    assert [r[:2] for r in records] == [
        ("distributed.protocol.pickle", "ERROR"),  # pass 1: "Failed to serialize"
        ("distributed.protocol.core", "INFO"),  # "falling back to pickle"
        ("distributed.protocol.pickle", "ERROR"),  # pass 2
        ("distributed.protocol.core", "CRITICAL"),  # "Failed to Serialize"
        ("distributed.comm.utils", "INFO"),  # "Unserializable Message"
        ("distributed.comm.utils", "ERROR"),
    ]


# caplog is cleared before each write (_outcome).
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(st.sampled_from(sorted(PARTS)), min_size=1, max_size=4),
    nest=st.booleans(),
    threshold=st.sampled_from([None, 1, 1, 2_000, False]),
    compression=st.sampled_from([None, "zlib"]),
)
def test_any_message_is_written_as_by_to_frames(names, nest, threshold, compression,
                                                caplog) -> None:
    caplog.set_level(logging.INFO, logger="distributed")
    with main_class() as cls:
        _compare(names, nest, cls, threshold, compression, caplog)


async def _submit_pickles(protocol: str) -> int:
    from distributed import Client, LocalCluster

    from tests.helpers_pickles import f

    async with LocalCluster(protocol=protocol, n_workers=1, threads_per_worker=1,
                            processes=False, dashboard_address=":0",
                            asynchronous=True) as cluster:
        async with Client(cluster, asynchronous=True) as client:
            with main_class() as cls:
                x = cls(3)
                start = Pickles.n
                assert await asyncio.wait_for(client.submit(f, x, x), 30) == 6
                return Pickles.n - start


async def test_submit_pickles_as_often_as_on_stock() -> None:
    """client.submit(f, x, x), x of a class of a script, in one process: the
    client (its tokenize and its graph) and the scheduler (the compute-task)
    pickle x as often over asynciocomm as over the stock tcp comm."""
    theirs = await _submit_pickles("tcp")
    ours = await _submit_pickles("asyncio")
    assert ours == theirs

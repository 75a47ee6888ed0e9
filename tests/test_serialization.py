"""The fast serialization path produces distributed's bytes and objects exactly."""

from __future__ import annotations

import operator
import threading

import numpy as np
import pytest
from dask._task_spec import Task
from distributed.core import Status
from distributed.protocol import dumps, loads, to_serialize
from distributed.protocol.serialize import Pickled, Serialized, ToPickle

from asynciocomm.serialization import FALLBACK, MessageCodec


PLAIN = [
    {"op": "task-finished", "key": "('x', 1)", "nbytes": 8, "startstops": ({"action": "compute", "start": 1.0},)},
    {"op": "stream", "msgs": [{"op": "a"}, {"op": "b", "v": [1, 2, None, True, 1.5]}]},
    [{"op": "heartbeat"}] * 50,
    {"bin": b"\x00\xff" * 100, "str": "é" * 10, "big": 2**63 - 1},
    {"has__dunder": "a__b"},
]
def _compute_task(i: int) -> dict:
    """The shape of the scheduler's hottest message with sub-frames."""
    return {"op": "compute-task", "key": ("wide-map", i), "run_id": 0,
            "priority": (0, 1, i), "stimulus_id": f"compute-task-{i}", "who_has": {},
            "nbytes": {}, "run_spec": ToPickle(Task(("wide-map", i), operator.add, i, 1)),
            "resource_restrictions": None, "actor": False, "annotations": {},
            "span_id": "8def9f18"}


#: Messages the hook encodes itself: the frames must be distributed's exactly.
HOOKED = [
    {"s": {1, 2, 3}},
    {"e": Status.running},
    {"p": ToPickle(lambda: 1)},  # cloudpickle by value
    {"p": ToPickle(b"x" * 5000)},
    [_compute_task(i) for i in range(40)],
    {"op": "mixed", "a": ToPickle({"nested": ToPickle(3)}), "set": {"k"}, "b": ToPickle(None)},
]
#: Messages that need distributed's own path (context, compression, Serialize).
SPECIAL = [
    {"data": to_serialize(np.arange(10))},
    {"p": ToPickle(np.arange(100_000))},  # out-of-band pickle buffers
    {"p": Pickled({"pickled-obj": b"\x80\x05N."}, [])},
    {"ok": ToPickle(1), "later": Serialized({"serializer": "pickle"}, [b""])},
    {"bad": ToPickle(threading.Lock())},
    {"bad": object()},
]


@pytest.mark.parametrize("msg", PLAIN)
def test_plain_messages_pack_to_distributed_bytes(msg) -> None:
    frame = MessageCodec().dumps(msg)
    assert frame is not FALLBACK
    assert [frame] == dumps(msg)
    assert MessageCodec.loads([memoryview(bytearray(frame))], len(frame), True, None) == loads([frame])


@pytest.mark.parametrize("msg", HOOKED, ids=range(len(HOOKED)))
def test_hooked_messages_pack_to_distributed_frames(msg) -> None:
    codec = MessageCodec()
    frames = codec.dumps(msg)
    expected = dumps(msg)
    if len(expected) == 1:
        assert frames == expected[0]
    else:
        assert frames == expected
    # The instance is reusable: no sub-frames leak into the next message.
    assert codec.dumps({"op": "next"}) == dumps({"op": "next"})[0]
    frames = [frames] if isinstance(frames, bytes) else frames
    views = [memoryview(bytearray(f)) for f in frames]
    got = MessageCodec.loads(views, sum(map(len, frames)), True, None)
    assert dumps(got) == dumps(loads(expected))  # Task and lambdas lack __eq__


@pytest.mark.parametrize("msg", SPECIAL, ids=range(len(SPECIAL)))
def test_special_messages_fall_back(msg) -> None:
    codec = MessageCodec()
    assert codec.dumps(msg) is FALLBACK
    assert codec.dumps({"op": "after-failure"}) == dumps({"op": "after-failure"})[0]
    assert codec.dumps({"p": ToPickle(2)}) == dumps({"p": ToPickle(2)})


@pytest.mark.parametrize("deserialize", [True, False])
def test_loads_matches_distributed_for_special_frames(deserialize: bool) -> None:
    msg = {"s": {1, 2}, "e": Status.running}
    frames = [memoryview(bytearray(f)) for f in dumps(msg)]
    nbytes = sum(f.nbytes for f in frames)
    assert MessageCodec.loads(frames, nbytes, deserialize, None) == loads(frames, deserialize=deserialize)


def test_pickle_by_value_registry_is_honoured() -> None:
    """A module registered for pickling by value switches distributed to
    cloudpickle; the hook must follow it (the plain pickle bytes differ)."""
    import cloudpickle

    from tests import certs

    msg = {"f": ToPickle(certs._name)}
    by_reference = MessageCodec().dumps(msg)
    cloudpickle.register_pickle_by_value(certs)
    try:
        by_value = MessageCodec().dumps(msg)
        assert by_value == dumps(msg)
    finally:
        cloudpickle.unregister_pickle_by_value(certs)
    assert by_value != by_reference
    assert by_reference == dumps(msg)


def test_codec_is_freed_by_reference_counting() -> None:
    """The packer's hook must not hold the codec: a cycle would keep every
    dropped comm alive, and its finalizer waiting, until the collector runs."""
    import gc

    gc.collect()
    gc.disable()
    try:
        codec = MessageCodec()
        assert codec.dumps({"p": ToPickle(1)}) == dumps({"p": ToPickle(1)})
        del codec
        assert gc.collect() == 0
    finally:
        gc.enable()

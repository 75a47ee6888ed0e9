"""The fast serialization path produces distributed's bytes and objects exactly."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest
from dask._task_spec import Task
from distributed.core import Status
from distributed.metrics import context_meter
from distributed.protocol import dumps, loads, to_serialize
from distributed.protocol.serialize import Pickled, Serialized, ToPickle, serialize

from asynciocomm.serialization import fast as serialization
from asynciocomm.serialization.continuation import Continuation
from asynciocomm.serialization.fast import MessageCodec
from tests.helpers_pickles import local_function

PLAIN = [
    {"op": "task-finished", "key": "('x', 1)", "nbytes": 8,
     "startstops": ({"action": "compute", "start": 1.0},)},
    {"op": "stream", "msgs": [{"op": "a"}, {"op": "b", "v": [1, 2, None, True, 1.5]}]},
    [{"op": "heartbeat"}] * 50,
    {"bin": b"\x00\xff" * 100, "str": "é" * 10, "big": 2**63 - 1},
    {"has__dunder": "a__b"},
]
def _compute_task(i: int, func: Any = operator.add) -> dict:
    """The shape of the scheduler's hottest message with sub-frames."""
    return {"op": "compute-task", "key": ("wide-map", i), "run_id": 0,
            "priority": (0, 1, i), "stimulus_id": f"compute-task-{i}", "who_has": {},
            "nbytes": {}, "run_spec": ToPickle(Task(("wide-map", i), func, i, 1)),
            "resource_restrictions": None, "actor": False, "annotations": {},
            "span_id": "8def9f18"}


#: Messages the hook encodes itself: the frames must be distributed's exactly.
HOOKED = [
    {"s": {1, 2, 3}},
    {"e": Status.running},
    {"p": ToPickle(lambda: 1)},  # cloudpickle by value
    {"p": ToPickle(b"x" * 5000)},
    [_compute_task(i) for i in range(40)],
    [_compute_task(i, local_function()) for i in range(40)],  # a function pickled by value
    {"op": "mixed", "a": ToPickle({"nested": ToPickle(3)}), "set": {"k"}, "b": ToPickle(None)},
    {"p": ToPickle(np.arange(100_000))},  # out-of-band pickle buffers
    {"p": ToPickle(np.zeros(100_000))},  # compressible ones
    {"p": Pickled({"pickled-obj": b"\x80\x05N."}, []), "q": ToPickle(2)},
]
#: Messages that need distributed's own path: Serialize needs the comm's context.
SPECIAL = [
    {"data": to_serialize(np.arange(10))},
    {"ok": ToPickle(1), "later": Serialized({"serializer": "pickle"}, [b""])},
    {"bad": object()},
]


@pytest.mark.parametrize("literal_opts", [True, False], ids=["literal-opts", "dist-opts"])
@pytest.mark.parametrize("msg", PLAIN)
def test_plain_messages_pack_to_distributed_bytes(msg, literal_opts: bool, monkeypatch) -> None:
    monkeypatch.setattr(serialization, "_PLAIN_OPTS", literal_opts)
    frame = MessageCodec().dumps(msg)
    assert not isinstance(frame, Continuation)
    assert [frame] == dumps(msg)
    got = MessageCodec.loads([memoryview(bytearray(frame))], len(frame), True, None)
    assert got == loads([frame])


def test_the_literal_unpack_options_are_distributeds() -> None:
    """The hook-free path spells distributed's options out; with the installed
    distributed they must be exactly its own, or the path is not taken."""
    assert serialization._PLAIN_OPTS
    assert serialization._UNPACK_OPTS == dict(use_list=False, raw=False, strict_map_key=False)


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
    assert isinstance(codec.dumps(msg), Continuation)
    assert codec.dumps({"op": "after-failure"}) == dumps({"op": "after-failure"})[0]
    assert codec.dumps({"p": ToPickle(2)}) == dumps({"p": ToPickle(2)})


@pytest.mark.parametrize("deserialize", [True, False])
def test_loads_matches_distributed_for_special_frames(deserialize: bool) -> None:
    msg = {"s": {1, 2}, "e": Status.running}
    frames = [memoryview(bytearray(f)) for f in dumps(msg)]
    nbytes = sum(f.nbytes for f in frames)
    got = MessageCodec.loads(frames, nbytes, deserialize, None)
    assert got == loads(frames, deserialize=deserialize)


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

    for _ in range(10):  # until earlier tests' garbage, and what its finalizers leave, is gone
        if not gc.collect():
            break
    gc.disable()
    try:
        codec = MessageCodec()
        assert codec.dumps({"p": ToPickle(1)}) == dumps({"p": ToPickle(1)})
        del codec
        assert gc.collect() == 0
    finally:
        gc.enable()


class _Comm:
    """The attributes of a comm that Serialize sub-frames need (its context)."""

    def __init__(self, compression: str | None = None, shard: int = 64 * 2**20,
                 allow_offload: bool = True) -> None:
        self.local_info = {"address": "asyncio://127.0.0.1:1", "compression": compression}
        self.remote_info = {"address": "asyncio://127.0.0.1:2", "compression": compression}
        self.handshake_options = {"compression": compression, "pickle-protocol": 5}
        self.max_shard_size = shard
        self.allow_offload = allow_offload

    def context(self) -> dict:
        return {"sender": self.local_info, "recipient": self.remote_info,
                **self.handshake_options}


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("no pickling here")


def _data_messages() -> list:
    arr = np.arange(1000, dtype="f8")
    return [
        {"op": "s",
         "p": to_serialize(np.random.default_rng(0).integers(0, 255, 65536, dtype="u1"))},
        {"status": "OK", "data": {("x", i): to_serialize(arr + i) for i in range(4)}},
        {"op": "s", "p": to_serialize(b"x" * 70_000), "q": to_serialize(bytearray(b"yz"))},
        {"op": "s", "p": to_serialize(np.zeros((30, 40), dtype="f4").T)},  # not contiguous
        {"op": "s", "p": to_serialize(_Comm)},  # pickled by the pickle family
        {"op": "mixed", "t": ToPickle((1, 2)), "s": {1}, "p": to_serialize(arr)},
        {"op": "fwd", "p": Serialized(*serialize(arr[:10]))},  # forwarded unread
        to_serialize(arr),  # the whole message
        {"op": "s", "nested": [{"deep": (to_serialize(arr[:5]), ToPickle(5))}]},
        {"op": "s", "t": ToPickle(np.zeros(50_000)), "p": to_serialize(arr)},  # compressed buffers
    ]


def _frame_bytes(frames) -> list[bytes]:
    return [bytes(f) for f in ([frames] if isinstance(frames, bytes) else frames)]


@pytest.mark.parametrize("compression", [None, "zlib"])
@pytest.mark.parametrize("i", range(len(_data_messages())))
def test_serialize_sub_frames_are_distributeds(i: int, compression) -> None:
    msg, comm = _data_messages()[i], _Comm(compression)
    frames = MessageCodec().dumps(msg, comm)
    assert not isinstance(frames, Continuation)
    expected = dumps(msg, context=comm.context(), frame_split_size=comm.max_shard_size)
    assert _frame_bytes(frames) == _frame_bytes(expected)
    views = [memoryview(bytearray(f)) for f in _frame_bytes(frames)]
    nbytes = sum(v.nbytes for v in views)
    for deserialize in (True, False):
        got = MessageCodec.loads(views, nbytes, deserialize, None)
        want = loads(views, deserialize=deserialize)
        assert dumps(got, context=comm.context()) == dumps(want, context=comm.context())


@pytest.mark.parametrize("on_error", ["message", "raise"])
def test_unserializable_data_errs_as_distributed_does(on_error: str) -> None:
    msg, comm = {"op": "s", "p": to_serialize(_Unpicklable())}, _Comm()
    if on_error == "raise":  # raised and logged as to_frames does: see below
        with pytest.raises(TypeError, match="Could not serialize object of type _Unpicklable"):
            MessageCodec().dumps(msg, comm, None, on_error)
        return
    frames = MessageCodec().dumps(msg, comm, None, on_error)
    expected = dumps(msg, context=comm.context(), on_error=on_error)
    # The headers agree; the error frames hold tracebacks of different stacks.
    assert _frame_bytes(frames)[:2] == _frame_bytes(expected)[:2]
    views = [memoryview(bytearray(f)) for f in _frame_bytes(frames)]
    with pytest.raises(TypeError, match="Could not serialize object of type _Unpicklable"):
        MessageCodec.loads(views, sum(v.nbytes for v in views), True, None)


def test_large_frames_are_split_and_compressed_as_distributed_does() -> None:
    arr = np.zeros(3 * 2**20 + 5, dtype="u1")  # compressible, three shards and a bit
    msg = {"op": "s", "p": to_serialize(arr)}
    comm = _Comm("zlib", shard=2**20)
    frames = MessageCodec().dumps(msg, comm)
    expected = dumps(msg, context=comm.context(), frame_split_size=2**20)
    assert len(frames) == len(expected) == 6  # head, sub-header, 4 shards
    assert _frame_bytes(frames) == _frame_bytes(expected)
    assert sum(map(len, _frame_bytes(frames))) < arr.nbytes // 10  # zlib did run
    uncompressed = MessageCodec().dumps(msg, _Comm(None, shard=2**20))
    assert all(np.shares_memory(np.asarray(f), arr) for f in uncompressed[2:])  # no copy


def _structured(n: int) -> np.ndarray:
    """An array distributed pickles the dtype of: never copy-free."""
    return np.zeros(n, dtype=[("a", "u1")])


def test_serialize_needs_the_comm_and_offloads_as_to_frames_does() -> None:
    """Above distributed's offload threshold a message is left to to_frames
    (which offloads it) before anything is serialized, unless what takes it
    over the threshold is copy-free arrays: those are serialized here, with
    the frames distributed makes, views of the arrays."""
    from distributed.comm.utils import OFFLOAD_THRESHOLD

    small = {"op": "s", "p": to_serialize(np.arange(10))}
    assert isinstance(MessageCodec().dumps(small), Continuation)  # no context without the comm
    n = OFFLOAD_THRESHOLD + 1
    for data in (_structured(n), np.zeros((2, n), "u1")[:, ::2], [_structured(2**20)] * 11):
        big = {"op": "s", "p": to_serialize(data)}
        # to_frames offloads it
        assert isinstance(MessageCodec().dumps(big, _Comm()), Continuation), data
        assert not isinstance(MessageCodec().dumps(big, _Comm(allow_offload=False)), Continuation)
    copy_free = {"op": "s", "p": to_serialize(np.arange(n, dtype="u1"))}
    # compression runs
    assert isinstance(MessageCodec().dumps(copy_free, _Comm("zlib")), Continuation)
    seen: list = []
    with context_meter.add_callback(lambda *a: seen.append(a)):  # as distributed, metered
        assert isinstance(MessageCodec().dumps(copy_free, _Comm()), Continuation)
    assert seen == []  # refused before anything was serialized
    # Copy-free arrays are serialized here: one above the threshold, or many
    # small ones that are above it together.
    parts = {"op": "s", "d": [to_serialize(np.zeros(2**20, "u1")) for _ in range(11)]}
    for msg, arrays in ((copy_free, [copy_free["p"].data]), (parts, [p.data for p in parts["d"]])):
        frames = MessageCodec().dumps(msg, _Comm())
        assert not isinstance(frames, Continuation)
        assert _frame_bytes(frames) == _frame_bytes(dumps(msg, context=_Comm().context()))
        assert all(np.shares_memory(np.asarray(f), a) for f, a in zip(frames[2::2], arrays))


def test_copy_free_arrays_are_read_here_above_the_threshold(monkeypatch) -> None:
    """A message above the live threshold is read here when, besides a head of
    at most the threshold, it holds only arrays read as views of their frames;
    anything else goes to from_frames (a Continuation), which offloads it."""
    _threshold(monkeypatch, 1000)
    arrays = [np.arange(2000, dtype="f8"), np.arange(300, dtype="i2").reshape(20, 15).T]

    def frames_of(msg: Any, readonly: bool = False) -> list:
        out = [bytes(f) if readonly else bytearray(f) for f in _frame_bytes(dumps(msg))]
        return [memoryview(f) for f in out]

    msg = {"op": "s", "p": to_serialize(arrays[0]), "q": [to_serialize(arrays[1]), {3}]}
    frames = frames_of(msg)
    got = MessageCodec.loads(frames, sum(f.nbytes for f in frames), True, None)
    assert not isinstance(got, Continuation) and got["q"][1] == {3}
    for a, b in zip((got["p"], got["q"][0]), arrays):
        np.testing.assert_array_equal(a, b)
    assert np.shares_memory(got["p"], np.asarray(frames[2]))
    others = [
        frames_of(msg, readonly=True),  # distributed's deserializer copies those
        frames_of({"op": "s", "p": to_serialize(_structured(2000))}),
        frames_of({"op": "s", "p": to_serialize(b"x" * 2000)}),
        frames_of({"op": "s", "t": ToPickle(arrays[0])}),
        frames_of({"op": "s", "p": to_serialize(arrays[0]), "h": b"x" * 1001}),  # a large head
        [memoryview(bytearray(f)) for f in dumps(msg, context={"compression": "zlib"})],
    ]
    for frames in others:
        nbytes = sum(f.nbytes for f in frames)
        assert isinstance(MessageCodec.loads(frames, nbytes, True, None), Continuation)


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_listened_metrics_are_distributeds(compression) -> None:
    """Where a callback listens (a worker's get-data, gather-dep), the codec
    reports the same metrics as distributed's dumps and loads, in order."""
    msg = {"status": "OK", "data": {"a": to_serialize(np.zeros(50_000)),
                                    "b": to_serialize(b"b" * 20_000)}}
    comm = _Comm(compression)

    def labels(fn) -> list:
        got: list = []
        with context_meter.add_callback(lambda label, value, unit: got.append((label, unit))):
            fn()
        return got

    frames = MessageCodec().dumps(msg, comm)
    ours = labels(lambda: MessageCodec().dumps(msg, comm))
    theirs = labels(lambda: dumps(msg, context=comm.context(),
                                  frame_split_size=comm.max_shard_size))
    assert ours == theirs and ("serialize", "seconds") in ours and ("compress", "seconds") in ours
    views = [memoryview(bytearray(f)) for f in _frame_bytes(frames)]
    ours = labels(lambda: MessageCodec.loads(views, sum(v.nbytes for v in views), True, None))
    theirs = labels(lambda: loads(views))
    assert ours == theirs
    assert ("decompress", "seconds") in ours and ("deserialize", "seconds") in ours


def test_failed_loads_logs_and_raises_as_distributed_does(caplog) -> None:
    msg = {"op": "s", "p": to_serialize(np.arange(10))}
    frames = _frame_bytes(MessageCodec().dumps(msg, _Comm()))
    frames[1] = frames[1][:-3]  # a truncated sub-header
    views = [memoryview(bytearray(f)) for f in frames]
    with pytest.raises(Exception) as theirs:
        loads(views)
    caplog.clear()
    with pytest.raises(type(theirs.value)):
        MessageCodec.loads(views, sum(v.nbytes for v in views), True, None)
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("distributed.protocol.core", "CRITICAL", "Failed to deserialize")]


def test_the_hook_drops_the_comm_after_each_message() -> None:
    import gc
    import weakref

    comm = _Comm()
    codec = MessageCodec()
    assert not isinstance(codec.dumps({"p": to_serialize(b"x")}, comm), Continuation)
    assert isinstance(codec.dumps({"bad": object()}, comm), Continuation)
    ref = weakref.ref(comm)
    gc.disable()
    try:
        del comm
        assert ref() is None  # freed by reference counting: the codec kept nothing
    finally:
        gc.enable()


def _threshold(monkeypatch, value) -> None:
    import distributed.comm.utils

    monkeypatch.setattr(distributed.comm.utils, "OFFLOAD_THRESHOLD", value)


@pytest.mark.parametrize("threshold", [1, "just below", "at", False])
def test_dumps_follows_the_live_offload_threshold(monkeypatch, threshold) -> None:
    """distributed's tests and some users lower the threshold at run time:
    to_frames reads it at each message, and so must the codec."""
    from distributed.sizeof import safe_sizeof

    msg = {"op": "s", "p": to_serialize(_structured(800))}
    # What to_frames compares with the threshold: about 1.2 kB, but its object
    # overheads (sys.getsizeof) differ with each CPython (1143 on 3.12, 1239 on 3.13).
    size = safe_sizeof(msg, default_size=-1)
    threshold = {"just below": size - 1, "at": size}.get(threshold, threshold)
    _threshold(monkeypatch, threshold)
    offloads = bool(threshold) and threshold < size  # to_frames: size > threshold
    assert isinstance(MessageCodec().dumps(msg, _Comm()), Continuation) is offloads
    assert not isinstance(MessageCodec().dumps(msg, _Comm(allow_offload=False)), Continuation)
    copy_free = {"op": "s", "p": to_serialize(np.arange(100))}  # the same size
    assert not isinstance(MessageCodec().dumps(copy_free, _Comm()), Continuation)


@pytest.mark.parametrize("threshold", [1, 100, False])
def test_loads_follows_the_live_offload_threshold(monkeypatch, threshold) -> None:
    _threshold(monkeypatch, threshold)
    for msg in ({"op": "ping"}, {"op": "s", "p": to_serialize(_structured(800))}):
        frames = [memoryview(bytearray(f)) for f in dumps(msg)]
        nbytes = sum(f.nbytes for f in frames)
        offloads = bool(threshold) and nbytes > threshold
        later = MessageCodec.loads(frames, nbytes, True, None)
        assert isinstance(later, Continuation) is offloads, nbytes
        # nothing to offload
        assert not isinstance(MessageCodec.loads(frames, nbytes, False, None), Continuation)

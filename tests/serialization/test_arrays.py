"""The NumPy fast paths: distributed's bytes and objects, or distributed's steps."""

from __future__ import annotations

import contextlib
import pickle
import zlib
from collections.abc import Iterator

import msgpack
import numpy as np
import pytest
from distributed import protocol
from distributed.metrics import context_meter
from distributed.protocol.serialize import (
    Serialize,
    dask_deserialize,
    dask_serialize,
    msgpack_encode_default,
    serialize_and_split,
    to_serialize,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from asynciocomm.serialization import arrays
from asynciocomm.serialization import fast as serialization

CONTEXT = {"sender": {}, "recipient": {}, "compression": None, "pickle-protocol": 5}


def _packed(header_frames: tuple) -> list[bytes]:
    header, frames = header_frames
    head = msgpack.dumps(header, default=msgpack_encode_default, use_bin_type=True)
    return [head, *(bytes(f) for f in frames)]


@contextlib.contextmanager
def _counting(module, name: str) -> Iterator[list]:
    """Counts the calls of distributed's step ``module.name`` (where the fast
    path's module finds it)."""
    seen: list = []
    step = getattr(module, name)

    def counting(*args, **kwargs):
        seen.append(args)
        return step(*args, **kwargs)

    setattr(module, name, counting)
    try:
        yield seen
    finally:
        setattr(module, name, step)


@pytest.fixture
def calls() -> Iterator[list]:
    with _counting(arrays, "_split") as seen:
        yield seen


def _check(obj, calls: list, fast: bool, serializers=None, size: int | None = 2**26) -> None:
    try:
        theirs = serialize_and_split(obj, serializers, "message", CONTEXT, size)
    except Exception as exc:  # e.g. a shard size below the item size
        with pytest.raises(type(exc)):
            arrays.split_serialized(obj, serializers=serializers, on_error="message",
                                    context=CONTEXT, size=size)
        return
    ours = arrays.split_serialized(obj, serializers=serializers, on_error="message",
                                   context=CONTEXT, size=size)
    assert len(calls) == (0 if fast else 1)
    assert list(ours[0]) == list(theirs[0])  # the same keys, in the same order
    assert _packed(ours) == _packed(theirs)


DTYPES = st.sampled_from(["u1", "i8", "<f4", ">f8", "c16", "?", "M8[ns]", "m8[s]",
                          "U3", "S2", [("a", "i4"), ("b", "f8")]])

VIEWS = st.sampled_from(["as-is", "transposed", "stepped", "broadcast", "read-only"])


def _viewed(arr: np.ndarray, view: str) -> np.ndarray:
    if view == "transposed":
        return arr.T
    if view == "stepped" and arr.ndim:
        return arr[::2]
    if view == "broadcast":
        return np.broadcast_to(arr, (2, *arr.shape))
    if view == "read-only":
        arr.flags.writeable = False
    return arr


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    arr=hnp.arrays(DTYPES.map(np.dtype),
                   hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6)),
    view=VIEWS,
    size=st.sampled_from([None, 64, 2**26]),
)
def test_arrays_serialize_to_distributeds_bytes(arr, view: str, size) -> None:
    arr = _viewed(arr, view)
    with _counting(arrays, "_split") as seen:  # not the fixture: hypothesis runs many examples
        _check(Serialize(arr), seen, fast=True, size=size)


def test_object_arrays_and_large_ones_split_into_shards(calls) -> None:
    _check(Serialize(np.array([{"a": 1}, None, "x"], dtype=object)), calls, fast=True)
    _check(Serialize(np.zeros(3, dtype="V4")), calls, fast=True)
    big = Serialize(np.arange(300_000, dtype="u1"))
    _check(big, calls, fast=True, size=100_000)
    header, frames = arrays.split_serialized(big, serializers=None, on_error="message",
                                             context=CONTEXT, size=100_000)
    assert header["split-num-sub-frames"] == (3,) and len(frames) == 3


def test_default_and_dask_first_serializers_take_the_fast_path(calls) -> None:
    arr = np.arange(10)
    _check(Serialize(arr), calls, fast=True, serializers=("dask", "pickle"))
    _check(Serialize(arr), calls, fast=True, serializers=["dask", "pickle", "error"])


class _Sub(np.ndarray):
    pass


@pytest.mark.parametrize(
    "obj, serializers",
    [
        (Serialize(np.arange(10).view(_Sub)), None),  # a subclass
        (Serialize(np.ma.masked_array([1, 2], mask=[0, 1])), None),  # its own serializer
        (Serialize(b"bytes"), None),
        (Serialize(np.arange(10)), ("pickle",)),
        (Serialize(np.arange(10)), ("pickle", "dask")),
        (Serialize(np.arange(10)), ()),
        (to_serialize([np.arange(3)]), None),  # a collection: serialize() iterates it
    ],
    ids=["subclass", "masked", "bytes", "pickle-only", "pickle-first", "none", "collection"],
)
def test_anything_else_is_distributeds_step(obj, serializers, calls) -> None:
    if serializers == ():
        with pytest.raises(Exception):  # no serializer at all: distributed's error
            arrays.split_serialized(obj, serializers=serializers, on_error="raise",
                                    context=CONTEXT, size=None)
        assert len(calls) == 1
        return
    _check(obj, calls, fast=False, serializers=serializers)


def test_a_replaced_ndarray_serializer_is_honoured(calls) -> None:
    arr = np.arange(10)
    arrays.split_serialized(Serialize(arr), serializers=None, on_error="message",
                            context=CONTEXT, size=None)  # arms the fast path
    calls.clear()
    lookup = dask_serialize._lookup
    original = lookup[np.ndarray]

    @dask_serialize.register(np.ndarray)
    def custom(x, context=None):
        return {"custom": True}, [b"replaced"]

    try:
        header, frames = arrays.split_serialized(
            Serialize(arr), serializers=None, on_error="message", context=CONTEXT, size=None)
    finally:
        lookup[np.ndarray] = original
    assert len(calls) == 1
    assert header["sub-header"] == {"custom": True} and frames == [b"replaced"]


def test_a_replaced_dask_family_is_honoured(calls, monkeypatch) -> None:
    import sys

    ser = sys.modules["distributed.protocol.serialize"]

    dumps, loads, wants = ser.families["dask"]
    monkeypatch.setitem(ser.families, "dask",
                        (lambda x, context=None: dumps(x, context), loads, wants))
    _check(Serialize(np.arange(10)), calls, fast=False)


def test_pickle_by_value_registration_is_honoured(calls) -> None:
    import cloudpickle

    import tests.certs as module  # any importable module of ours

    cloudpickle.register_pickle_by_value(module)
    try:
        _check(Serialize(np.arange(10)), calls, fast=False)
    finally:
        cloudpickle.unregister_pickle_by_value(module)


def test_a_listening_meter_gets_distributeds_metric(calls) -> None:
    got: list = []
    with context_meter.add_callback(lambda label, value, unit: got.append(label)):
        arrays.split_serialized(Serialize(np.arange(10)), serializers=None,
                                on_error="message", context=CONTEXT, size=None)
    assert len(calls) == 1 and got == ["serialize"]


def test_a_failing_numpy_serializer_leaves_the_error_to_distributed(calls, monkeypatch) -> None:
    arrays.split_serialized(Serialize(np.arange(3)), serializers=None, on_error="message",
                            context=CONTEXT, size=None)  # arms the fast path
    calls.clear()

    def failing(x, context=None):
        raise ValueError("cannot")

    # As if distributed's own serializer raised (for an array it cannot take).
    monkeypatch.setitem(dask_serialize._lookup, np.ndarray, failing)
    monkeypatch.setattr(arrays._Fast, "serialize", failing)
    _check(Serialize(np.arange(10)), calls, fast=False)
    header, frames = arrays.split_serialized(
        Serialize(np.arange(10)), serializers=None, on_error="message", context=CONTEXT, size=None)
    assert header["serializer"] == "error" and b"cannot" in bytes(frames[-1])


# -- the read side: read_array -------------------------------------------------------

ARRAY_DTYPES = st.sampled_from(["u1", "i8", "<f4", ">f8", "c16", "?", "M8[ns]", "m8[s]",
                                "U3", "S2"])


@pytest.fixture
def merges() -> Iterator[list]:
    with _counting(serialization, "_merge") as seen:
        yield seen


def _received(frames: list) -> list[memoryview]:
    """The frames as the decoder hands them out: writable views of their own."""
    return [memoryview(bytearray(f)) for f in frames]


def _frames_of(arr, frame_split_size=None) -> list[memoryview]:
    return _received(protocol.dumps({"op": "x", "a": to_serialize(arr)},
                                    frame_split_size=frame_split_size))


def _loads(frames: list, deserializers=None):
    """Our codec's read of a whole message, and distributed's."""
    nbytes = sum(f.nbytes for f in frames)
    ours = serialization.MessageCodec.loads(frames, nbytes, True, deserializers)
    theirs = protocol.loads(frames, deserialize=True, deserializers=deserializers)
    return ours, theirs


def _same_array(ours, theirs, frames: list, view: bool) -> None:
    assert type(ours) is type(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert ours.strides == theirs.strides
    assert ours.flags.writeable == theirs.flags.writeable
    assert ours.tobytes() == theirs.tobytes()
    if view and ours.nbytes:  # a view of the received frame, not a copy
        assert np.shares_memory(ours, np.frombuffer(frames[-1], dtype="u1"))


def _read_check(frames: list, merges: list, fast: bool, deserializers=None) -> None:
    before = len(merges)
    ours, theirs = _loads(frames, deserializers)
    assert len(merges) - before == (0 if fast else 1)
    if isinstance(theirs["a"], np.ndarray):
        _same_array(ours["a"], theirs["a"], frames, view=fast)
    else:
        assert type(ours["a"]) is type(theirs["a"]) and ours["a"] == theirs["a"]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    arr=hnp.arrays(ARRAY_DTYPES.map(np.dtype),
                   hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6)),
    view=VIEWS,
)
def test_arrays_read_as_distributed_reads_them(arr, view: str) -> None:
    arr = _viewed(arr, view)
    # not the fixture: hypothesis runs many examples
    with _counting(serialization, "_merge") as seen:
        _read_check(_frames_of(arr), seen, fast=True)
        _read_check(_frames_of(arr), seen, fast=True)  # again, its header cached now


def test_each_read_gets_an_array_of_its_own_frame(merges) -> None:
    frames_a, frames_b = _frames_of(np.arange(4)), _frames_of(np.arange(4) * 10)
    a, b = _loads(frames_a)[0]["a"], _loads(frames_b)[0]["a"]
    assert list(a) == [0, 1, 2, 3] and list(b) == [0, 10, 20, 30]
    a[0] = 7  # writable, and only its own
    assert b[0] == 0 and not np.shares_memory(a, b) and not merges


@pytest.mark.parametrize(
    "arr, split",
    [
        (np.array([{"a": 1}, None, "x"], dtype=object), None),  # pickled
        (np.zeros(3, dtype=[("a", "i4"), ("b", "f8")]), None),  # a pickled dtype
        (np.zeros(3, dtype="V4"), None),
        (np.arange(300_000, dtype="u1"), 100_000),  # three shards
        (np.ma.masked_array([1, 2], mask=[0, 1]), None),  # its own deserializer
        (np.arange(10).view(np.matrix), None),  # another type
    ],
    ids=["object", "structured", "void", "shards", "masked", "subclass"],
)
def test_other_arrays_read_through_distributeds_step(arr, split, merges) -> None:
    frames = _frames_of(arr, frame_split_size=split)
    before = len(merges)
    ours, theirs = _loads(frames)
    assert len(merges) - before >= 1
    assert type(ours["a"]) is type(theirs["a"])
    assert ours["a"].dtype == theirs["a"].dtype
    assert np.asarray(ours["a"]).tolist() == np.asarray(theirs["a"]).tolist()


def test_shards_of_one_receive_buffer_read_fast(merges) -> None:
    """An array larger than distributed.comm.shard arrives in shards; the
    decoder keeps them adjacent in one buffer (the stock writer's shared
    region), so they are read as one view of it, without distributed's merge."""
    arr = np.arange(300_000, dtype="u1")
    frames = _frames_of(arr, frame_split_size=100_000)
    assert len(frames) == 5  # head, sub-header, three shards
    block = memoryview(bytearray(b"".join(frames[2:])))
    frames[2:] = [block[i : i + f.nbytes] for i, f in zip((0, 100_000, 200_000), frames[2:])]
    _read_check(frames, merges, fast=True)
    assert np.shares_memory(_loads(frames)[0]["a"], np.frombuffer(block, dtype="u1"))


def test_deserializers_with_dask_read_fast_and_others_as_distributed(merges) -> None:
    frames = _frames_of(np.arange(10))
    _read_check(frames, merges, fast=True, deserializers=("dask", "pickle"))
    with pytest.raises(TypeError) as theirs:
        protocol.loads(frames, deserialize=True, deserializers=("pickle",))
    with pytest.raises(TypeError) as ours:
        serialization.MessageCodec.loads(frames, 0, True, ("pickle",))
    assert str(ours.value) == str(theirs.value) and len(merges) == 1


def _with_sub_header(frames: list, **changes) -> list:
    """The message with its array's sub-header changed (and re-packed)."""
    header = msgpack.loads(frames[1], use_list=False, strict_map_key=False)
    header.update(changes)
    return [frames[0], memoryview(msgpack.dumps(header, use_bin_type=True)), *frames[2:]]


def test_compressed_frames_read_through_distributeds_step(merges) -> None:
    arr = np.random.default_rng(0).integers(0, 255, 1000, dtype="u1")
    frames = _with_sub_header(_frames_of(arr), compression=("zlib",))
    frames[-1] = memoryview(zlib.compress(frames[-1]))  # random: larger than the array
    _read_check(frames, merges, fast=False)
    assert list(_loads(frames)[0]["a"]) == list(arr)


def test_only_one_shard_at_offset_0_reads_fast(merges) -> None:
    frames = _frames_of(np.arange(100, dtype="u1"))
    _read_check(frames, merges, fast=True)
    moved = _with_sub_header(frames, **{"split-offsets": (1,)})
    serialization.MessageCodec.loads(moved, 0, True, None)  # its content: distributed's say
    assert len(merges) == 1


def test_another_serializer_with_an_arrays_header_reads_as_distributed(merges) -> None:
    frames = _with_sub_header(_frames_of(np.arange(10)), serializer="pickle")
    with pytest.raises(Exception) as theirs:
        protocol.loads(frames, deserialize=True)
    with pytest.raises(type(theirs.value)):
        serialization.MessageCodec.loads(frames, 0, True, None)
    assert len(merges) == 1


_unpickled: list = []


def _count_and_fail() -> None:
    _unpickled.append(1)
    raise RuntimeError("cannot unpickle")


class _FailsToUnpickle:
    def __reduce__(self):
        return _count_and_fail, ()


def test_a_pickled_array_is_unpickled_once_even_when_that_fails(merges) -> None:
    frames = _with_sub_header(_frames_of(np.arange(3, dtype="u1")), **{"sub-header": {
        "pickle": True, "dtype": (0, "|u1"), "shape": (3,), "strides": (1,),
        "writeable": (True,)}})
    frames[-1] = memoryview(pickle.dumps(_FailsToUnpickle()))
    _unpickled.clear()
    with pytest.raises(RuntimeError, match="cannot unpickle"):
        serialization.MessageCodec.loads(frames, 0, True, None)
    assert len(_unpickled) == 1 and len(merges) == 1


def test_a_marker_in_the_sub_header_leaves_it_to_distributeds_hook(merges) -> None:
    frames = _with_sub_header(_frames_of(np.arange(5)), note="__not-a-marker__")
    _read_check(frames, merges, fast=False)


def test_a_replaced_ndarray_deserializer_is_honoured(merges) -> None:
    frames = _frames_of(np.arange(10))
    _read_check(frames, merges, fast=True)  # armed, and the header cached
    lookup = dask_deserialize._lookup
    original = lookup[np.ndarray]
    lookup[np.ndarray] = lambda header, frames: "replaced"
    try:
        ours, theirs = _loads(frames)
    finally:
        lookup[np.ndarray] = original
    assert ours["a"] == theirs["a"] == "replaced" and len(merges) == 1


def test_a_replaced_dask_family_is_honoured_on_read(merges, monkeypatch) -> None:
    import sys

    ser = sys.modules["distributed.protocol.serialize"]
    frames = _frames_of(np.arange(10))
    _read_check(frames, merges, fast=True)
    dumps, loads, wants = ser.families["dask"]
    monkeypatch.setitem(ser.families, "dask", (dumps, lambda h, f: "family", wants))
    ours, theirs = _loads(frames)
    assert ours["a"] == theirs["a"] == "family" and len(merges) == 1


def test_a_listening_meter_gets_distributeds_read_metrics(merges) -> None:
    frames = _frames_of(np.arange(10))
    _read_check(frames, merges, fast=True)
    got: list = []
    with context_meter.add_callback(lambda label, value, unit: got.append(label)):
        serialization.MessageCodec.loads(frames, 0, True, None)
    assert len(merges) == 1 and "deserialize" in got and "decompress" in got


def test_a_failing_read_raises_and_logs_as_distributed_does(merges, caplog) -> None:
    frames = _frames_of(np.arange(10))
    _read_check(frames, merges, fast=True)
    frames = _with_sub_header(frames, **{"sub-header": {
        "dtype": (0, "<i8"), "shape": (999,), "strides": (8,), "writeable": (True,)}})
    with pytest.raises(ValueError) as theirs:  # the buffer is too small for the shape
        protocol.loads(frames, deserialize=True)
    caplog.clear()
    with pytest.raises(ValueError) as ours:
        serialization.MessageCodec.loads(frames, 0, True, None)
    assert str(ours.value) == str(theirs.value) and len(merges) == 1
    assert ("distributed.protocol.core", "CRITICAL", "Failed to deserialize") in [
        (r.name, r.levelname, r.getMessage()) for r in caplog.records]


def test_the_header_cache_is_bounded(merges) -> None:
    arrays._read_cache.clear()
    for n in range(arrays.READ_CACHE_ENTRIES + 5):
        _read_check(_frames_of(np.zeros(n, dtype="u1")), merges, fast=True)
    assert 0 < len(arrays._read_cache) <= arrays.READ_CACHE_ENTRIES


def test_a_header_unpacked_for_nothing_is_handed_on(merges) -> None:
    """An array's header that does not qualify is unpacked once: read_array
    hands it over, equal to what distributed's decode hook makes of it."""
    from distributed.protocol.serialize import msgpack_decode_default

    frames = _frames_of(np.array([None, 1], dtype=object))
    expected = msgpack.loads(frames[1], object_hook=msgpack_decode_default,
                             use_list=False, strict_map_key=False)
    got, header = arrays.read_array(frames, 1, None)
    assert got is arrays.NOT_FAST and header == expected
    got, header = arrays.read_array(_frames_of(np.arange(3)), 1, None)
    assert header is None and list(got) == [0, 1, 2]
    marked = _with_sub_header(_frames_of(np.arange(3)), note="__x__")
    assert arrays.read_array(marked, 1, None) == (arrays.NOT_FAST, None)

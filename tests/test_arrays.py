"""The NumPy fast path of serialize_and_split: distributed's bytes, or distributed's step."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import msgpack
import numpy as np
import pytest
from distributed.metrics import context_meter
from distributed.protocol.serialize import (
    Serialize,
    dask_serialize,
    msgpack_encode_default,
    serialize_and_split,
    to_serialize,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from asynciocomm import arrays

CONTEXT = {"sender": {}, "recipient": {}, "compression": None, "pickle-protocol": 5}


def _packed(header_frames: tuple) -> list[bytes]:
    header, frames = header_frames
    head = msgpack.dumps(header, default=msgpack_encode_default, use_bin_type=True)
    return [head, *(bytes(f) for f in frames)]


@contextlib.contextmanager
def _counting_split() -> Iterator[list]:
    """Counts the calls of distributed's step from the fast path's module."""
    seen: list = []
    step = arrays._split

    def counting(*args, **kwargs):
        seen.append(args)
        return step(*args, **kwargs)

    arrays._split = counting
    try:
        yield seen
    finally:
        arrays._split = step


@pytest.fixture
def calls() -> Iterator[list]:
    with _counting_split() as seen:
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


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    arr=hnp.arrays(DTYPES.map(np.dtype), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6)),
    view=st.sampled_from(["as-is", "transposed", "stepped", "broadcast"]),
    size=st.sampled_from([None, 64, 2**26]),
)
def test_arrays_serialize_to_distributeds_bytes(arr, view: str, size) -> None:
    if view == "transposed":
        arr = arr.T
    elif view == "stepped" and arr.ndim:
        arr = arr[::2]
    elif view == "broadcast":
        arr = np.broadcast_to(arr, (2, *arr.shape))
    with _counting_split() as seen:  # not the fixture: hypothesis runs many examples
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
    monkeypatch.setitem(ser.families, "dask", (lambda x, context=None: dumps(x, context), loads, wants))
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

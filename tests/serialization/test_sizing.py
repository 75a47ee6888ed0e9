"""asynciocomm.serialization.sizing: the same number as ``safe_sizeof(msg, default_size=-1)``."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from dask.sizeof import sizeof
from distributed.protocol.serialize import Serialize, ToPickle
from distributed.sizeof import safe_sizeof
from hypothesis import given, settings
from hypothesis import strategies as st

from asynciocomm.serialization import sizing
from asynciocomm.serialization.sizing import SAMPLE, message_size


def stock(msg: object) -> Any:
    return safe_sizeof(msg, default_size=-1)


def same(msg: object, seed: int = 0) -> tuple[Any, Any]:
    """Both numbers, each from the same random state (dask samples long
    collections at random, and the walk visits nodes in dask's order)."""
    random.seed(seed)
    ours = message_size(msg)
    random.seed(seed)
    theirs = stock(msg)
    return ours, theirs


class Odd:
    """A user type whose registered size is a float."""

    def __init__(self, n: float) -> None:
        self.n = n


class Broken:
    """A user type whose registered sizeof raises."""


@pytest.fixture(autouse=True)
def registrations() -> Iterator[None]:
    """Register the test types; restore dask's table afterwards."""
    saved = dict(sizeof._lookup)
    sizeof.register(Odd)(lambda o: o.n)

    @sizeof.register(Broken)
    def _broken(o: Broken) -> int:
        raise ValueError("no size")

    yield
    sizeof._lookup.clear()
    sizeof._lookup.update(saved)


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=100),
    st.binary(max_size=100).map(bytearray),
    st.binary(max_size=100).map(memoryview),
    st.integers(0, 300).map(lambda n: np.arange(n, dtype="u1")),
    st.integers(1, 50).map(lambda n: np.broadcast_to(np.arange(3.0), (n, 3))),
    st.floats(0, 1e9, allow_nan=False).map(Odd),
    st.integers(0, 1000).map(lambda n: Serialize(np.zeros(n))),
    st.binary(max_size=50).map(ToPickle),
)
messages = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=14),
        st.lists(inner, max_size=14).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), inner, max_size=14),
        st.frozensets(st.integers(), max_size=14),
        inner.map(Serialize),
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(messages, st.integers(0, 2**32 - 1))
def test_same_number_as_safe_sizeof(msg: object, seed: int) -> None:
    ours, theirs = same(msg, seed)
    assert ours == theirs
    assert type(ours) is type(theirs)


def test_data_message() -> None:
    msg = {"op": "s", "p": Serialize(np.zeros(8192))}
    assert message_size(msg) == stock(msg) > 65536


def test_long_collections_are_dasks_samples() -> None:
    # More than SAMPLE items: dask estimates from a random sample, so the size
    # depends on which items it drew; the walk draws the same ones.
    items = [b"x" * i for i in range(SAMPLE * 3)]
    msg = {"a": items, "b": tuple(items), "c": {i: v for i, v in enumerate(items)}}
    results = {same(msg, seed)[0] for seed in range(20)}
    assert len(results) > 1  # the sample matters
    for seed in range(20):
        ours, theirs = same(msg, seed)
        assert ours == theirs


def test_float_sizes_are_not_rounded() -> None:
    # A size just above the offload threshold must stay above it.
    msg = {"op": "x", "p": [Odd(10 * 2**20 + 0.5), 1]}
    assert message_size(msg) == stock(msg)
    assert isinstance(message_size(msg), float)


def test_float_sizes_are_summed_as_builtin_sum() -> None:
    # From CPython 3.12 sum() adds floats with compensated summation: there a
    # running "+=" gives 3972148711.018521 for these, dask's sum() ...0185204.
    sizes = [760947737.5418205, 952244455.2911937, 926506623.785866,
             416179938.8943461, 916269835.5052942]
    odds = [Odd(n) for n in sizes]
    for msg in (odds, [b"int-sized first", *odds, b"and last"], {"op": "x", "p": tuple(odds)}):
        assert message_size(msg) == stock(msg)


def test_follows_replaced_registrations() -> None:
    msg = {"op": "x", "p": [1, 2, Serialize(b"abc")]}
    before = message_size(msg)
    dask_dict = sizeof.dispatch(dict)
    sizeof.register(dict)(lambda d: 7)
    assert message_size(msg) == stock(msg) == 7
    sizeof.register(dict)(dask_dict)
    # dask's dict size counts its keys and values as lists: a list
    # registration of the user's counts there too.
    sizeof.register(list)(lambda seq: 1000)
    assert message_size(msg) == stock(msg)
    assert message_size(msg) != before


def test_subclasses_take_dasks_dispatch() -> None:
    class MyDict(dict):  # type: ignore[type-arg]
        pass

    msg = MyDict(op="x", p=[b"ab", MyDict(q=b"c" * 100)])
    assert message_size(msg) == stock(msg)


def test_failure_is_safe_sizeofs_default_and_warning(caplog: pytest.LogCaptureFixture) -> None:
    msg = {"op": "x", "p": [1, Broken()]}

    def warnings() -> list[str]:
        out = [r.getMessage() for r in caplog.records if r.name == "distributed.sizeof"]
        caplog.clear()
        return out

    with caplog.at_level(logging.WARNING, logger="distributed.sizeof"):
        assert stock(msg) == -1
        theirs = warnings()
        assert message_size(msg) == -1
        ours = warnings()
    assert len(theirs) == 1
    assert ours == theirs  # one warning, safe_sizeof's own


@pytest.mark.parametrize("depth", [sizing.MAX_DEPTH - 1, sizing.MAX_DEPTH + 5, 300, 5000])
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_deep_nesting(depth: int, kind: str) -> None:
    # dask recurses through four frames per dict level, the walk through two:
    # from about 250 levels dask hits the recursion limit (and safe_sizeof
    # returns its default) where the walk would not; past MAX_DEPTH it defers.
    msg: Any = b"leaf"
    for _ in range(depth):
        msg = [msg] if kind == "list" else {"k": msg}
    assert message_size(msg) == stock(msg)
    if depth == 5000 or (kind, depth) == ("dict", 300):
        assert message_size(msg) == -1


def test_without_dasks_table(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def spy(msg: object, default_size: int) -> int:
        calls.append(msg)
        return 42

    monkeypatch.setattr(sizing, "_LOOKUP", None)
    monkeypatch.setattr(sizing, "safe_sizeof", spy)
    msg = {"op": "x"}
    assert message_size(msg) == 42
    assert calls == [msg]

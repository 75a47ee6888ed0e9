"""Objects that count how often they are pickled, for tests that compare with stock.

Every pickler (``pickle``, distributed's ``_DaskPickler``, cloudpickle) calls
``__reduce__`` once per object and pickle, however often the object occurs in
what is pickled. :class:`Counted` lives in an importable module;
:func:`main_class` makes a class of ``__main__``, as one defined in a user's
script, which distributed pickles with ``pickle`` and then again by value with
cloudpickle. The count is a class attribute, so that cloudpickle refers to it
and does not copy it into the bytes.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any


class Pickles:
    """How many times a counted object was pickled."""

    n = 0


def _reduce(self: Any) -> tuple[Any, tuple[Any, ...]]:
    Pickles.n += 1
    return type(self), self.args


def _init(self: Any, *args: Any) -> None:
    self.args = args


def _sum(self: Any) -> int:
    return sum(a for a in self.args if isinstance(a, int))


class Counted:
    """Counts its pickles; ``args`` are pickled along with it."""

    __init__ = _init
    __reduce__ = _reduce
    total = _sum


@contextlib.contextmanager
def main_class(name: str = "MainCounted") -> Iterator[type]:
    """A counting class of ``__main__``, reachable there while the block runs."""
    cls = type(name, (), {"__init__": _init, "__reduce__": _reduce, "total": _sum,
                          "__module__": "__main__", "__qualname__": name})
    main = sys.modules["__main__"]
    setattr(main, name, cls)
    try:
        yield cls
    finally:
        delattr(main, name)


@contextlib.contextmanager
def counting() -> Iterator[list[int]]:
    """``[n]``: the pickles of counted objects while the block runs."""
    seen = [0]
    start = Pickles.n
    try:
        yield seen
    finally:
        seen[0] = Pickles.n - start


def f(a: Any, b: Any) -> int:
    """A task of two counted arguments."""
    return int(a.total() + b.total())


#: A lambda of an importable module: pickle looks up ``<lambda>`` there and fails.
lam = lambda x: x  # noqa: E731


def local_function() -> Any:
    """A new local function, pickled by value as a user's is."""

    def inc(x: Any) -> Any:
        return x

    return inc


class Dasked:
    """Has a dask serializer, which ``_DaskPickler`` uses; pickle cannot pickle
    it (a local function in it), cloudpickle pickles it by value."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.fn = local_function()


def dask_dumps(x: Any) -> tuple[dict[str, Any], list[bytes]]:
    """A dask serializer that names what it got: a Dasked, a function or a task."""
    name = getattr(x, "n", None) or getattr(x, "__qualname__", None) or type(x).__qualname__
    return {"what": str(name)}, []


def dask_loads(header: dict[str, Any], frames: list[Any]) -> Any:
    """The other half of :func:`dask_dumps`."""
    return header["what"]


class DaskLoaded:
    """The other half of :func:`dask_dumps` for functions and tasks: a class,
    since a function registered for functions would be reduced by itself."""

    def __init__(self, header: dict[str, Any], frames: list[Any]) -> None:
        self.what = header["what"]


def _register() -> None:
    from distributed.protocol.serialize import dask_deserialize, dask_serialize

    dask_serialize.register(Dasked)(dask_dumps)
    dask_deserialize.register(Dasked)(dask_loads)


_register()

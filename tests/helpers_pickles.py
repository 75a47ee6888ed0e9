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

"""What the pure-Python decoder and encoder need of Cython's ``cython`` module,
when Cython is not installed.

Cython is a build-time tool: it compiles ``decoder.py`` and ``encoder.py`` into
their twins, reading the declarations there. Run as plain Python, those
declarations only have to be harmless, which is all this module makes them
(Cython's own shadow module does the same when it is installed). The compiled
twins never import this module: Cython resolves ``cython`` at compile time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

compiled = False
#: C types, as the Python types that stand in for them.
Py_ssize_t = int
int = int  # noqa: A001 - the name Cython's module gives the C int


def _same(x: T) -> T:
    return x


cclass: Callable[[T], T] = _same
cfunc: Callable[[T], T] = _same
ccall: Callable[[T], T] = _same


def declare(kind: Any = None, value: Any = None, **_: Any) -> Any:
    """``cython.declare(type)`` in a class body and ``cython.declare(type, value)``
    for a module constant: the value (None for a field, which __init__ sets)."""
    return value

"""``to_frames``' offload sizing, the same number for less time.

Before a message with ``Serialize`` data is serialized, the stock comm takes
``safe_sizeof`` of the whole message and offloads above
``distributed.comm.utils.OFFLOAD_THRESHOLD`` as it is at that moment;
:mod:`asynciocomm.serialization.packing` keeps that rule. For
a ``{"op": ..., "data": Serialize(array)}`` message most of that call is
``dask.sizeof``'s dispatch, once per node: 3.9 µs of the sender's 50 µs per 64 KiB
message over TLS. :func:`message_size` walks the message itself, and returns the
same number as ``safe_sizeof(msg, default_size=-1)``:

* It looks each node's type up in the dispatch's own table. It follows only
  dask's and distributed's registrations for dicts, lists and tuples of at most
  ``SAMPLE`` items (larger ones are sampled at random by dask: their size is
  dask's own call) and ``Serialize`` / ``ToPickle`` (the size of ``.data``), each
  computed as those functions compute it. Any other registered function
  (``bytes``, numpy arrays, ...) is called as it is: the dispatch's
  ``__call__`` is skipped and nothing else. A type not in the table yet, a
  registration replaced by the user, a dask without this table: dask's
  ``sizeof`` itself.
* Past ``MAX_DEPTH`` levels, or on any exception, it starts over with
  ``safe_sizeof`` itself, so deep nesting and failures (its warning, its
  default) behave exactly as in the stock comm.
"""

from __future__ import annotations

import sys
from typing import Any

from dask.sizeof import sizeof
from distributed.protocol.serialize import Serialize
from distributed.sizeof import safe_sizeof

from asynciocomm.serialization import internals

#: dask samples collections longer than this (``sizeof_python_collection``).
SAMPLE = 10
#: Nesting deeper than this is sized by ``safe_sizeof`` from the start: dask
#: recurses through up to four frames per level, this walk through two, so
#: they would hit the recursion limit at different depths. Messages nest a
#: handful of levels; 32 leaves room and stays far below any limit.
MAX_DEPTH = 32

# Private names (asynciocomm.serialization.internals): where one is missing, dask's sizeof
# sizes every message.
_LOOKUP: dict[type, Any] | None = internals.SIZEOF_LOOKUP
_DICT = internals.SIZEOF_DICT
_COLLECTION = internals.SIZEOF_COLLECTION
_SERIALIZE = sizeof.dispatch(Serialize)  # distributed's; ToPickle shares it
_EMPTY_LISTS = 2 * sys.getsizeof([])  # what sizeof_python_dict subtracts
_getsizeof = sys.getsizeof


class _Restart(Exception):
    """Too deep for the walk: size the message with safe_sizeof instead."""


def message_size(msg: object) -> int:
    """``safe_sizeof(msg, default_size=-1)``, computed faster where possible."""
    if _LOOKUP is None or _DICT is None or _COLLECTION is None:
        return safe_sizeof(msg, default_size=-1)
    try:
        return _size(msg, 0)  # type: ignore[no-any-return]
    except Exception:
        # Too deep, or a sizeof function failed: the stock call decides, logs
        # its warning and returns its default.
        return safe_sizeof(msg, default_size=-1)


def _size(obj: object, depth: int) -> Any:
    # Each branch adds in dask's order, so float sizes round alike; results are
    # returned as the registered functions return them (no int()).
    assert _LOOKUP is not None
    t = type(obj)
    f = _LOOKUP.get(t)
    if f is None:
        return sizeof(obj)  # resolves the MRO and lazy registrations
    if depth > MAX_DEPTH:
        raise _Restart
    if f is _DICT and len(obj) <= SAMPLE and _LOOKUP.get(list) is _COLLECTION:  # type: ignore[arg-type]
        d: dict[Any, Any] = obj  # type: ignore[assignment]
        keys = list(d.keys())
        values = list(d.values())
        depth += 1
        return (
            _getsizeof(d)
            + (_getsizeof(keys) + _total(keys, depth))
            + (_getsizeof(values) + _total(values, depth))
            - _EMPTY_LISTS
        )
    if f is _COLLECTION and (t is list or t is tuple) and len(obj) <= SAMPLE:  # type: ignore[arg-type]
        return _getsizeof(obj) + _total(obj, depth + 1)  # type: ignore[arg-type]
    if f is _SERIALIZE:
        return _size(obj.data, depth + 1)  # type: ignore[attr-defined]
    return f(obj)


def _total(items: list[Any] | tuple[Any, ...], depth: int) -> Any:
    """``sum(map(sizeof, items))``: from 0, left to right, each size once.
    Ints are added here (exact, as ``sum``); from the first other size on, the
    builtin ``sum`` adds, as in dask, since from CPython 3.12 it adds floats
    with compensated (Neumaier) summation, which a ``+=`` loop does not."""
    total: Any = 0
    rest = iter(items)
    for item in rest:
        size = _size(item, depth)
        if type(size) is not int:
            return sum([total, size, *[_size(x, depth) for x in rest]])
        total += size
    return total

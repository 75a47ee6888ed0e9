"""distributed's ``serialize_and_split`` for a ``Serialize``'d NumPy array, cheaper.

A data message (a worker's ``get-data`` reply, the bench's 64 KiB messages) is
mostly ``Serialize(ndarray)``. distributed's ``serialize_and_split`` spends 5.0 µs
on a 64 KiB array, of which ``serialize_numpy_ndarray`` itself is 1.1 µs. The
rest is generic: ``serialize``'s checks and family loop, ``dask_dumps``'
dispatch and keyword test, and ``pickle.dumps(type(x))``, 1.6 µs for the same
bytes every time.

:func:`split_serialized` builds the same header, with the same keys in the same
order, and the same frames, in 1.9 µs, when all of these hold:

* the object is exactly a ``Serialize`` of exactly a ``numpy.ndarray``
  (subclasses have serializers of their own);
* the serializers are the default ones or start with ``"dask"``;
* distributed's ``"dask"`` family and its registration for ``ndarray`` are the
  ones it ships (a user may replace either);
* no module is registered with cloudpickle for pickling by value (that would
  change distributed's pickle of the type, computed once here);
* no metric callback listens (distributed's step is metered; see
  :mod:`asynciocomm.metering`);
* ``serialize_numpy_ndarray`` succeeds (on failure distributed's step runs, and
  reports the error its own way).

Otherwise it calls distributed's step. numpy is never imported here: the fast
path is armed by the first ``Serialize`` of an array, whose module is loaded.
"""

from __future__ import annotations

import sys
from typing import Any

import cloudpickle
from distributed.protocol.pickle import dumps as _pickle_dumps
from distributed.protocol.serialize import (
    Serialize,
    dask_dumps,
    dask_serialize,
    families,
    serialize_and_split,
    typename,
)
from distributed.protocol.utils import frame_split_size

from asynciocomm.metering import listening, unobserved

_split = unobserved(serialize_and_split)


class _Fast:
    """What the fast path needs, found once numpy is in use."""

    armed = False  # looked for already (numpy was imported then)
    ndarray: Any = None  # numpy.ndarray, or None where the fast path is off
    serialize: Any = None  # distributed's serialize_numpy_ndarray
    type_name = ""
    type_serialized = b""


def _arm() -> None:
    """Find numpy.ndarray and distributed's serializer for it, if both are there."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return  # no array can exist yet; look again next time
    _Fast.armed = True
    try:
        from distributed.protocol.numpy import serialize_numpy_ndarray

        ndarray = numpy.ndarray
        # dispatch() runs the lazy registration of distributed's numpy module.
        if dask_serialize.dispatch(ndarray) is not serialize_numpy_ndarray:
            return
        if dask_serialize._lookup.get(ndarray) is not serialize_numpy_ndarray:
            return  # not where this module checks it on every call
        type_serialized = _pickle_dumps(ndarray)
    except Exception:  # distributed's internals differ: leave it to distributed
        return
    _Fast.type_name = typename(ndarray)
    _Fast.type_serialized = type_serialized
    _Fast.serialize = serialize_numpy_ndarray
    _Fast.ndarray = ndarray


def _applies(obj: Any, serializers: Any) -> bool:
    if type(obj) is not Serialize:
        return False
    if not _Fast.armed:
        _arm()
    return (
        _Fast.ndarray is not None
        and type(obj.data) is _Fast.ndarray
        and (serializers is None or (len(serializers) > 0 and serializers[0] == "dask"))
        and families.get("dask", (None,))[0] is dask_dumps
        and dask_serialize._lookup.get(_Fast.ndarray) is _Fast.serialize
        and not cloudpickle.list_registry_pickle_by_value()
        and not listening()
    )


def split_serialized(
    obj: Any, *, serializers: Any, on_error: str | None, context: Any, size: int | None
) -> tuple[dict[str, Any], list[Any]]:
    """``serialize_and_split(obj, serializers, on_error, context, size)``."""
    if _applies(obj, serializers):
        try:
            sub_header, frames = _Fast.serialize(obj.data, context=context)
        except Exception:
            pass  # distributed's step fails the same way, and reports it
        else:
            # dask_dumps' header, then serialize()'s "serializer" (the same
            # value, already in place), then serialize_and_split's keys.
            header: dict[str, Any] = {
                "sub-header": sub_header,
                "type": _Fast.type_name,
                "type-serialized": _Fast.type_serialized,
                "serializer": "dask",
            }
            num_sub_frames = []
            offsets = []
            out_frames: list[Any] = []
            for frame in frames:
                sub_frames = frame_split_size(frame, n=size)
                num_sub_frames.append(len(sub_frames))
                offsets.append(len(out_frames))
                out_frames.extend(sub_frames)
            header["split-num-sub-frames"] = tuple(num_sub_frames)
            header["split-offsets"] = tuple(offsets)
            header["compression"] = (None,) * len(out_frames)
            return header, out_frames
    return _split(obj, serializers=serializers, on_error=on_error, context=context, size=size)

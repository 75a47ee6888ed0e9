"""distributed's serialization steps for a NumPy array in a message, cheaper.

Write side: ``serialize_and_split`` of a ``Serialize``'d array.

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
  :mod:`asynciocomm.serialization.metering`);
* ``serialize_numpy_ndarray`` succeeds (on failure distributed's step runs, and
  reports the error its own way).

Otherwise it calls distributed's step.

Read side: :func:`read_array` reads one ``__Serialized__`` sub-message: its
header unpacked, then ``decompress`` and ``merge_and_deserialize``. For a plain
array that is mostly generic too: the two meters' wrappers, ``deserialize``'s
family lookup, ``pickle.loads`` of the type, the dispatch, ``log_errors``, and
unpacking the same header bytes for every array of one dtype, shape and layout.
It calls distributed's ``deserialize_numpy_ndarray`` itself (the function under
``log_errors``), with each header unpacked once, when all of these hold (the
whole 64 KiB message through ``MessageCodec.loads``: 6.2 → 2.3 µs):

* the header's bytes hold no ``__`` (distributed's decode hook acts only on
  its ``__``-markers);
* the header is the ``"dask"`` serializer's, not a collection, and its
  ``type-serialized`` is exactly the bytes distributed pickles ``numpy.ndarray``
  to here;
* the deserializers are the default ones or include ``"dask"``;
* distributed's ``"dask"`` family and its ``ndarray`` deserializer are its own;
* no frame is compressed, and the array's buffer is one frame, or shards
  that ``merge_memoryviews`` joins without a copy (adjacent in one buffer);
* the array is neither pickled (object dtype) nor of a pickled dtype
  (structured): unpickling is left to distributed, so that it runs once;
* no metric callback listens;
* the deserializer succeeds (on failure distributed's steps run again, and log
  and raise the error their own way).

Other data pays little for the test: a sub-header without the bytes of the
ndarray type's pickle is left at once (0.3 µs), and one that is unpacked here
and turns out not to qualify (object or structured arrays, sharded or
compressed ones) is handed to distributed's steps, which then do not unpack it
again.

numpy is never imported here: both fast paths are armed by the first array,
whose module is loaded by then (and so is distributed's ``protocol.numpy``,
which arming imports). Once armed, they are checked against distributed's own
steps, as ``dumps`` and ``loads`` call them, on canonical arrays
(:func:`_difference`); a difference turns both off, with one WARNING.
"""

from __future__ import annotations

import sys
from typing import Any

import cloudpickle
import msgpack
from distributed.protocol.compression import compressions
from distributed.protocol.pickle import dumps as _pickle_dumps
from distributed.protocol.serialize import (
    Serialize,
    dask_deserialize,
    dask_dumps,
    dask_loads,
    dask_serialize,
    families,
    serialize_and_split,
    typename,
)
from distributed.protocol.utils import frame_split_size, merge_memoryviews

from asynciocomm.serialization import internals
from asynciocomm.serialization.metering import listening, unheard, unobserved

_split = unobserved(serialize_and_split)
# Private names (asynciocomm.serialization.internals): where one is missing, that side's fast
# path stays off.
_serialize_lookup: Any = internals.SERIALIZE_LOOKUP
_deserialize_lookup: Any = internals.DESERIALIZE_LOOKUP


class _Fast:
    """What the fast paths need, found once numpy is in use."""

    armed = False  # looked for already (numpy was imported then)
    ndarray: Any = None  # numpy.ndarray, or None where both fast paths are off
    serialize: Any = None  # distributed's serialize_numpy_ndarray, or None: write path off
    deserialize: Any = None  # distributed's deserialize_numpy_ndarray, or None: read path off
    deserialize_bare: Any = None  # the function under its log_errors
    type_name = ""
    type_serialized = b""


def _arm() -> None:
    """Find numpy.ndarray and distributed's (de)serializer for it, if there."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return  # no array can exist yet; look again next time
    _Fast.armed = True
    try:
        from distributed.protocol.numpy import (
            deserialize_numpy_ndarray,
            serialize_numpy_ndarray,
        )

        ndarray = numpy.ndarray
        # dispatch() runs the lazy registration of distributed's numpy module.
        serialize = dask_serialize.dispatch(ndarray)
        deserialize = dask_deserialize.dispatch(ndarray)
        type_serialized = _pickle_dumps(ndarray)
    except Exception:  # distributed's internals differ: leave it to distributed
        return
    _Fast.type_name = typename(ndarray)
    _Fast.type_serialized = type_serialized
    _Fast.ndarray = ndarray
    # Registered where the fast paths check them on every call.
    if (
        serialize is serialize_numpy_ndarray
        and _serialize_lookup is not None
        and _serialize_lookup.get(ndarray) is serialize
    ):
        _Fast.serialize = serialize
    bare = internals.unwrapped(deserialize)
    if (
        deserialize is deserialize_numpy_ndarray
        and bare is not None
        and _deserialize_lookup is not None
        and _UNPACK_OPTS is not None
        and _deserialize_lookup.get(ndarray) is deserialize
    ):
        _Fast.deserialize = deserialize
        _Fast.deserialize_bare = bare
    if _Fast.serialize is not None or _Fast.deserialize is not None:
        try:
            with unheard():  # arming happens inside some message's metered step
                difference = _difference(numpy)
        except Exception as e:  # a release the check cannot run on
            difference = f"{type(e).__name__}: {e}"
        if difference is not None:
            _Fast.serialize = _Fast.deserialize = _Fast.deserialize_bare = None
            from asynciocomm.serialization import selfcheck

            selfcheck.report(f"{internals.ARRAY_WRITE} and reading is off: {difference}")


def _same_array(a: Any, b: Any) -> bool:
    return bool(type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
                and a.strides == b.strides and a.tobytes() == b.tobytes())


def _difference(numpy: Any) -> str | None:
    """How this module's write and read of canonical arrays differ from
    distributed's own steps, looked up where its ``dumps`` and ``loads`` call
    them (None: they do not). Each array is serialized by
    :func:`split_serialized` and by distributed's ``serialize_and_split``, the
    headers compared as packed bytes and the frames byte for byte; distributed's
    frames are then read by :func:`read_array` and by ``merge_and_deserialize``."""
    from distributed.protocol import core
    from distributed.protocol.serialize import merge_and_deserialize, msgpack_encode_default

    def packed(header: dict[str, Any], n: int) -> bytes:
        # As the codec writes a sub-header: its frame count added, then packed.
        return msgpack.dumps({**header, "num-sub-frames": n},
                             default=msgpack_encode_default, use_bin_type=True)

    arrays = {"array": numpy.arange(16, dtype="f8"),
              "transposed array": numpy.zeros((2, 3), dtype="u1").T}
    kw: dict[str, Any] = {"serializers": None, "on_error": "message", "context": None,
                          "size": None}
    for name, array in arrays.items():
        ours = split_serialized(Serialize(array), **kw)
        theirs = core.serialize_and_split(Serialize(array), **kw)
        if (packed(ours[0], len(ours[1])) != packed(theirs[0], len(theirs[1]))
                or [bytes(f) for f in ours[1]] != [bytes(f) for f in theirs[1]]):
            return f"{name}: written differently from distributed's serialize_and_split"
        frames = [memoryview(bytearray(packed(theirs[0], len(theirs[1]))))]
        frames += [memoryview(bytearray(f)) for f in theirs[1]]
        got, _ = read_array(frames, 0, None)
        expected = merge_and_deserialize(theirs[0], frames[1:])
        if got is not NOT_FAST and not _same_array(got, expected):
            return f"{name}: read differently from distributed's merge_and_deserialize"
    return None


def _applies(obj: Any, serializers: Any) -> bool:
    if type(obj) is not Serialize:
        return False
    if not _Fast.armed:
        if type(obj.data).__name__ != "ndarray":
            return False  # armed by the first array: other data does not pay for it
        _arm()
    return (
        _Fast.serialize is not None
        and type(obj.data) is _Fast.ndarray
        and (serializers is None or (len(serializers) > 0 and serializers[0] == "dask"))
        and families.get("dask", (None,))[0] is dask_dumps
        and _serialize_lookup.get(_Fast.ndarray) is _Fast.serialize
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


def copy_free_nbytes(obj: Any, serializers: Any, context: Any) -> int:
    """The bytes of ``obj`` if it is a ``Serialize``'d array whose serialization
    copies and compresses nothing, else -1.

    That is an array :func:`split_serialized` takes, C- or F-contiguous,
    without zero strides, of a dtype distributed neither pickles (object) nor
    pickles the dtype of (structured), with the comm's compression off: its
    frame is a view of the array, so serializing it costs the same few
    microseconds at any size. Its bytes are what ``dask.sizeof`` counts for it.
    """
    if not _applies(obj, serializers):
        return -1
    x = obj.data
    dtype = x.dtype
    if (dtype.hasobject or dtype.kind == "V" or 0 in x.strides
            or not (x.flags.c_contiguous or x.flags.f_contiguous)):
        return -1
    name = context["compression"] if context and "compression" in context else "auto"
    try:
        if compressions[name].name:  # what maybe_compress would use
            return -1
    except (KeyError, TypeError):
        return -1
    return int(x.nbytes)


#: Marker: the sub-message is not one the read fast path takes.
NOT_FAST: Any = object()
#: Sub-header frames already checked, mapped to (header, number of frames for
#: the deserializer). Unpacking the header is 1.0 µs of a 64 KiB array's read,
#: and it is the same bytes for every array of one dtype, shape and layout. The
#: dict is shared: only deserialize_numpy_ndarray sees it, and it only reads it.
#: Bounded: a stream of ever new shapes empties it whenever it is full.
_read_cache: dict[bytes, tuple[dict[str, Any], int]] = {}
READ_CACHE_ENTRIES = 256
#: None where distributed's options are missing: the read path is off there.
_UNPACK_OPTS: Any = internals.UNPACK_OPTS if internals.MSGPACK_OPTS is not None else None


def _checked(header: Any) -> tuple[dict[str, Any], int] | None:
    """The cache entry of a sub-header the fast path takes, else None. A header
    of another shape raises here: the caller then leaves it to distributed."""
    if header["serializer"] != "dask" or header["type-serialized"] != _Fast.type_serialized:
        return None  # also every collection: its type-serialized is a str
    take = header["num-sub-frames"]
    compression = header.get("compression")
    if compression is not None and compression.count(None) != len(compression):
        return None
    split = header.get("split-num-sub-frames")
    if split is not None and (split != (take,) or header.get("split-offsets") != (0,)):
        return None  # one buffer, in one shard or in several (merged in read_array)
    sub = header["sub-header"]
    if sub.get("pickle") or sub["dtype"][0] != 0:
        return None  # unpickling is left to distributed, so that it runs once
    return header, take


def read_array(frames: list[Any], offset: int, deserializers: Any) -> tuple[Any, Any]:
    """The ``__Serialized__`` sub-message at ``frames[offset]``, read as
    ``decompress`` and ``merge_and_deserialize`` read it.

    Returns ``(object, None)``, or ``(NOT_FAST, header)`` for distributed's steps
    to read: ``header`` is the sub-header when it was unpacked here (a dict of
    the caller's own, as distributed's decode hook would have made it), else
    None, and the caller unpacks it."""
    if not _Fast.armed:
        if b"ndarray" not in bytes(frames[offset]):
            return NOT_FAST, None  # armed by the first array: other data does not pay for it
        _arm()
    if _Fast.deserialize is None:
        return NOT_FAST, None
    key = bytes(frames[offset])
    if (
        _Fast.type_serialized not in key  # no array's header: other data stays cheap
        or not (deserializers is None or "dask" in deserializers)
        or families.get("dask", (None, None))[1] is not dask_loads
        or _deserialize_lookup.get(_Fast.ndarray) is not _Fast.deserialize
        or listening()
    ):
        return NOT_FAST, None
    entry = _read_cache.get(key)
    if entry is None:
        if key.find(b"__") >= 0:
            return NOT_FAST, None  # distributed's decode hook could act on it
        try:
            header = msgpack.loads(key, **_UNPACK_OPTS)
        except Exception:
            return NOT_FAST, None  # distributed's step fails the same way, and logs it
        try:
            entry = _checked(header)
        except Exception:
            entry = None
        if entry is None:
            return NOT_FAST, header  # not an array's: unpacked once only
        if len(_read_cache) >= READ_CACHE_ENTRIES:
            _read_cache.clear()
        _read_cache[key] = entry
    header, take = entry
    start = offset + 1
    shards = frames[start : start + take]
    if take > 1:
        # The shards of one buffer larger than distributed.comm.shard: adjacent
        # in one receive buffer (the stock writer's layout, which the decoder
        # keeps), so merge_memoryviews joins them without a copy, as in
        # distributed's merge step; anything else is left to that step.
        try:
            shards = [merge_memoryviews(shards)]
        except (ValueError, TypeError):
            return NOT_FAST, None
    try:
        return _Fast.deserialize_bare(header["sub-header"], shards), None
    except Exception:
        return NOT_FAST, None  # distributed's steps fail the same way, and log it

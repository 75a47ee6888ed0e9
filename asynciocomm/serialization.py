"""A faster path through distributed's serialization, with identical bytes.

Most scheduler traffic is small msgpack-only messages (``task-finished``,
``heartbeat``, ``task-erred``, stream batches of plain dicts). For them
``distributed.comm.utils.to_frames`` spends more time deciding whether to offload
(``dask.sizeof`` walks the message) and building closures than msgpack spends
packing, and ``from_frames`` calls a Python ``object_hook`` for every dict.

* **Write.** :meth:`MessageCodec.dumps` packs the message with one persistent
  msgpack ``Packer(use_bin_type=True)`` whose ``default`` hook mirrors
  distributed's ``_encode_default``: ``ToPickle`` (a task's ``run_spec`` in every
  ``compute-task``), sets and enums, and, when the comm passes itself, the
  ``Serialize`` / ``Serialized`` sub-frames of data messages, built by the same
  distributed functions with the comm's context, shard size and compression
  (a plain NumPy array by :mod:`asynciocomm.arrays`, with the same result).
  The frames are then exactly those of ``distributed.protocol.dumps``.
  ``Pickled``, a ``ToPickle`` that yields out-of-band pickle buffers (they would
  be compressed), a message ``to_frames`` would offload, and anything that fails
  make it return FALLBACK, and the comm calls ``to_frames``, offload and all.

  For messages without ``Serialize`` this path skips ``to_frames``' offload
  decision, ``safe_sizeof`` over the whole message. On the scheduler's
  ``compute-task`` batches that walk costs 11 µs per message, more than pickling
  the task spec (4 µs) and packing the rest together; the walk itself runs on the
  event loop. msgpack and pickle of in-band Python objects hold the GIL, so a
  thread would free the loop little. The one loss is a ``ToPickle`` of a huge
  in-band object graph (which ``safe_sizeof`` samples cheaply and the stock comm
  would pickle in a thread): here it is pickled on the loop. A message with a
  ``Serialize`` gets ``to_frames``' rule exactly: ``safe_sizeof`` of the whole
  message (its number, from :mod:`asynciocomm.sizing`), before anything is
  serialized, and FALLBACK (offload) above
  ``distributed.comm.offload``. Its metered steps go through
  :mod:`asynciocomm.metering`.
* **Read.** :meth:`MessageCodec.loads` handles one-frame messages below the
  offload threshold. distributed's hook only acts on dicts carrying one of the
  markers ``__Enum__``, ``__Set__``, ``__Serialized__``, ``__Pickled__``; a frame
  without ``__`` anywhere in its bytes cannot contain one, so it is unpacked with
  no hook at all. Other messages below the threshold get :func:`loads`,
  distributed's ``loads`` step for step, whose metered steps (``decompress``,
  ``merge_and_deserialize``) go through :mod:`asynciocomm.metering`; it skips
  the ``from_frames`` coroutine and its size sum.
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

import cloudpickle
import msgpack
from distributed.comm.utils import OFFLOAD_THRESHOLD
from distributed.protocol import pickle as _dist_pickle
from distributed.protocol.compression import decompress, maybe_compress
from distributed.protocol.pickle import HIGHEST_PROTOCOL as _HIGHEST
from distributed.protocol.pickle import dumps as _pickle_dumps
from distributed.protocol.serialize import (
    Pickled,
    Serialize,
    Serialized,
    ToPickle,
    merge_and_deserialize,
    msgpack_decode_default,
    msgpack_encode_default,
)
from distributed.protocol.utils import msgpack_opts

from asynciocomm.arrays import NOT_FAST, read_array, split_serialized
from asynciocomm.metering import unobserved
from asynciocomm.sizing import message_size

#: Marker meaning "use distributed's general path for this message".
FALLBACK: Any = object()

_MARK = b"__"
_UNPACK_OPTS = dict(use_list=False, **msgpack_opts)
#: Whether distributed's msgpack options are the ones the hook-free fast path
#: spells out as literal keywords (those of 2026.8 and later). A ``**`` call
#: builds a dict per message: 323 ns against 196 ns for a 77-byte message.
_PLAIN_OPTS = msgpack_opts == {"strict_map_key": False, "raw": False}
_unpackb = msgpack.unpackb
_OFFLOAD = OFFLOAD_THRESHOLD or 0
_compress = unobserved(maybe_compress)
_decompress = unobserved(decompress)
_merge = unobserved(merge_and_deserialize)
#: distributed's logger for a failed deserialization, so that it reads the same.
_core_logger = logging.getLogger("distributed.protocol.core")


class _NeedsFallback(Exception):
    """Raised inside the msgpack hook: this object needs distributed's path."""


def _pickle_inband(x: Any) -> bytes:
    """``distributed.protocol.pickle.dumps(x, buffer_callback=...)``, byte for byte.

    distributed's function first tries ``pickle.dumps`` and keeps its result
    unless it fails, contains ``__main__``, or ``x``'s module is registered for
    pickling by value; only then does it call cloudpickle. With no module
    registered (the usual case) its ``inspect.getmodule`` test cannot match, so
    the plain result is kept without it: a quarter of the cost of pickling a
    task spec. In every other case distributed's function decides.
    Raises _NeedsFallback when pickle yields out-of-band buffers: distributed
    compresses those, with the comm's context.
    """
    buffers: list[Any] = []
    try:
        result = pickle.dumps(x, protocol=_HIGHEST, buffer_callback=buffers.append)
    except Exception:
        result = None
    if result is None or b"__main__" in result or cloudpickle.list_registry_pickle_by_value():
        buffers = []
        result = _pickle_dumps(x, buffer_callback=buffers.append)
    if buffers:
        raise _NeedsFallback
    return result


class _Hook:
    """The packer's ``default``: distributed's ``_encode_default``, with the
    state of the message being packed. Sub-frames go to ``sub``, whose item 0 is
    the place of the head frame. ``comm`` is set only while a message is packed
    (a lasting reference would make a cycle through the comm's codec)."""

    __slots__ = ("sub", "msg", "comm", "serializers", "on_error", "context", "sized")

    def __init__(self) -> None:
        self.sub: list[Any] = []
        self.reset()

    def reset(self) -> None:
        self.msg: Any = None
        self.comm: Any = None
        self.serializers: Any = None
        self.on_error: str | None = "message"
        self.context: dict[str, Any] | None = None
        self.sized = False

    def encode(self, obj: Any) -> Any:
        """The hook itself: msgpack calls it for every object it cannot pack."""
        if isinstance(obj, ToPickle):
            pickled = _pickle_inband(obj.data)
            sub = self.sub
            if not sub:
                sub.append(b"")
            offset = len(sub)
            # The keys and their order are those distributed writes.
            sub.append(msgpack.dumps(
                {"pickled-obj": pickled, "compression": (), "num-sub-frames": 0}))
            return {"__Pickled__": offset}
        if isinstance(obj, (Serialize, Serialized)):
            frames = self._serialized_sub_frames(obj)
            sub = self.sub
            if not sub:
                sub.append(b"")
            offset = len(sub)
            sub += frames
            return {"__Serialized__": offset}
        if isinstance(obj, Pickled):
            raise _NeedsFallback
        return msgpack_encode_default(obj)  # sets, enums; else obj -> TypeError

    def _serialized_sub_frames(self, obj: Serialize | Serialized) -> list[Any]:
        """distributed's ``create_serialized_sub_frames``, step for step."""
        comm = self.comm
        if comm is None:
            raise _NeedsFallback
        if isinstance(obj, Serialized):
            header, frames = obj.header, obj.frames
        else:
            if not self.sized:
                # to_frames' offload rule, checked before anything is serialized.
                self.sized = True
                if _OFFLOAD and comm.allow_offload:
                    size = message_size(self.msg)  # safe_sizeof's number
                    if size == -1 or size > _OFFLOAD:
                        raise _NeedsFallback
            context = self.context
            if context is None:
                context = self.context = {
                    "sender": comm.local_info,
                    "recipient": comm.remote_info,
                    **comm.handshake_options,
                }
            header, frames = split_serialized(
                obj,
                serializers=self.serializers,
                on_error=self.on_error,
                context=context,
                size=comm.max_shard_size,
            )
            opts = {"compression": context["compression"]} if "compression" in context else {}
            compression = list(header.get("compression", [None] * len(frames)))
            for i in range(len(frames)):
                if compression[i] is None:
                    compression[i], frames[i] = _compress(frames[i], **opts)
            header["compression"] = tuple(compression)
        header["num-sub-frames"] = len(frames)
        return [msgpack.dumps(header, default=msgpack_encode_default, use_bin_type=True), *frames]


class MessageCodec:
    """Per-comm fast (de)serializer. One instance per comm: the msgpack Packer
    keeps an internal buffer and its hook collects sub-frames, so it must not be
    shared across threads. The hook holds no lasting reference to the comm or
    this instance: no reference cycle keeps a dropped comm alive until the
    garbage collector runs (its finalizer closes it)."""

    __slots__ = ("_packer", "_hook")

    def __init__(self) -> None:
        self._hook = _Hook()
        self._packer = msgpack.Packer(use_bin_type=True, default=self._hook.encode)

    def dumps(
        self,
        msg: Any,
        comm: Any = None,
        serializers: Any = None,
        on_error: str | None = "message",
    ) -> bytes | list[Any] | Any:
        """distributed's frames for ``msg``: the one frame as ``bytes``, a list
        when there are sub-frames, or FALLBACK. ``comm`` (with the write's
        ``serializers`` and ``on_error``) supplies the context that
        ``Serialize`` sub-frames need; without it they make it FALLBACK."""
        hook = self._hook
        sub = hook.sub
        if comm is not None:
            hook.msg = msg
            hook.comm = comm
            hook.serializers = serializers
            hook.on_error = on_error
        try:
            head = self._packer.pack(msg)
        except Exception:  # _NeedsFallback, TypeError, pickling errors; the packer resets
            sub.clear()
            return FALLBACK
        finally:
            if comm is not None:
                hook.reset()
        if not sub:
            return head
        frames = sub.copy()
        sub.clear()
        frames[0] = head
        return frames

    @staticmethod
    def loads(
        frames: list[memoryview], nbytes: int, deserialize: bool, deserializers: Any
    ) -> Any:
        """The message, or FALLBACK when it needs offloading (large, deserialized)."""
        if _OFFLOAD and deserialize and nbytes > _OFFLOAD:
            return FALLBACK
        if len(frames) == 1:
            frame = frames[0]
            obj = frame.obj if isinstance(frame, memoryview) else frame
            if isinstance(obj, (bytes, bytearray)) and len(obj) == nbytes:
                if obj.find(_MARK) < 0:  # find(): 88 ns, ``in``: 145 ns
                    if _PLAIN_OPTS:
                        return _unpackb(obj, use_list=False, raw=False, strict_map_key=False)
                    return _unpackb(obj, **_UNPACK_OPTS)
        return loads(frames, deserialize, deserializers)


def loads(frames: list[Any], deserialize: bool = True, deserializers: Any = None) -> Any:
    """``distributed.protocol.loads``, step for step: the same objects, errors
    and log record; ``decompress`` and ``merge_and_deserialize`` are metered
    whenever a callback listens."""
    try:

        def decode(obj: dict[str, Any]) -> Any:
            offset = obj.get("__Serialized__", 0)
            if offset > 0:
                sub_header = None
                if deserialize:
                    array, sub_header = read_array(frames, offset, deserializers)
                    if array is not NOT_FAST:
                        return array
                if sub_header is None:
                    sub_header = msgpack.loads(
                        frames[offset], object_hook=msgpack_decode_default, **_UNPACK_OPTS)
                offset += 1
                sub_frames = frames[offset : offset + sub_header["num-sub-frames"]]
                if deserialize:
                    if "compression" in sub_header:
                        sub_frames = _decompress(sub_header, sub_frames)
                    return _merge(sub_header, sub_frames, deserializers=deserializers)
                return Serialized(sub_header, sub_frames)
            offset = obj.get("__Pickled__", 0)
            if offset > 0:
                sub_header = msgpack.loads(frames[offset])
                offset += 1
                sub_frames = frames[offset : offset + sub_header["num-sub-frames"]]
                if "compression" in sub_header:
                    sub_frames = _decompress(sub_header, sub_frames)
                return _dist_pickle.loads(sub_header["pickled-obj"], buffers=sub_frames)
            return msgpack_decode_default(obj)

        return msgpack.loads(frames[0], object_hook=decode, **_UNPACK_OPTS)
    except Exception:
        _core_logger.critical("Failed to deserialize", exc_info=True)
        raise

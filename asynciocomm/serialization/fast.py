"""A faster path through distributed's serialization, with identical bytes.

Most scheduler traffic is small msgpack-only messages (``task-finished``,
``heartbeat``, ``task-erred``, stream batches of plain dicts). For them
``distributed.comm.utils.to_frames`` spends more time deciding whether to offload
(``dask.sizeof`` walks the message) and building closures than msgpack spends
packing, and ``from_frames`` calls a Python ``object_hook`` for every dict.

* **Write.** :meth:`MessageCodec.dumps` packs the message with one persistent
  msgpack ``Packer(use_bin_type=True)`` whose ``default`` hook is distributed's
  ``_encode_default``: ``ToPickle`` (a task's ``run_spec`` in every
  ``compute-task``; pickled by :mod:`asynciocomm.serialization.pickling`, its out-of-band
  buffers compressed with the comm's context), ``Pickled``, sets and enums, and,
  when the comm passes itself, the ``Serialize`` / ``Serialized`` sub-frames of
  data messages, built by the same distributed functions with the comm's
  context, shard size and compression (a plain NumPy array by
  :mod:`asynciocomm.serialization.arrays`, with the same result). The frames are then exactly
  those of ``distributed.protocol.dumps``.

  Nothing is pickled or serialized more often than there. A message that fails
  before anything was pickled or serialized returns FALLBACK, and the comm's
  :meth:`MessageCodec.fallback` calls ``to_frames``, offload and all. Once
  something was, distributed's next steps run here instead of starting over: on
  a ``TypeError`` its second pass (whatever msgpack cannot take is pickled), then
  its logs and the error; a message that ``to_frames`` would offload is packed
  again in the offload thread, taking the sub-frames already made as they are.

  For messages without ``Serialize`` this path skips ``to_frames``' offload
  decision, ``safe_sizeof`` over the whole message. On the scheduler's
  ``compute-task`` batches that walk costs 11 µs per message, more than pickling
  the task spec (4 µs) and packing the rest together; the walk itself runs on the
  event loop. msgpack and pickle of in-band Python objects hold the GIL, so a
  thread would free the loop little. The one loss is a ``ToPickle`` of a huge
  in-band object graph (which ``safe_sizeof`` samples cheaply and the stock comm
  would pickle in a thread): here it is pickled on the loop. A message with a
  ``Serialize`` gets ``to_frames``' rule: ``safe_sizeof`` of the whole
  message (its number, from :mod:`asynciocomm.serialization.sizing`), before any ``Serialize``
  is serialized, and the offload above ``distributed.comm.utils.OFFLOAD_THRESHOLD``
  (read at each message, as distributed reads it, so that a threshold changed at
  run time applies), except that copy-free arrays do not count toward it
  (``Hook._offload_rule`` in :mod:`asynciocomm.serialization.packing`). Its metered steps go
  through :mod:`asynciocomm.serialization.metering`.
* **Read.** :meth:`MessageCodec.loads` handles messages up to the same live
  threshold; larger ones return FALLBACK, and the comm calls ``from_frames``,
  which offloads them, unless all they hold besides a small msgpack head is
  arrays read without a copy (:func:`loads_copy_free`). distributed's hook
  only acts on dicts carrying one of the
  markers ``__Enum__``, ``__Set__``, ``__Serialized__``, ``__Pickled__``; a frame
  without ``__`` anywhere in its bytes cannot contain one, so it is unpacked with
  no hook at all. Other messages below the threshold get :func:`loads`,
  distributed's ``loads`` step for step, whose metered steps (``decompress``,
  ``merge_and_deserialize``) go through :mod:`asynciocomm.serialization.metering`; it skips
  the ``from_frames`` coroutine and its size sum.
"""

from __future__ import annotations

import logging
from typing import Any

import msgpack
from distributed.comm import utils as _comm_utils
from distributed.protocol import pickle as _dist_pickle
from distributed.protocol.compression import decompress
from distributed.protocol.serialize import (
    Serialized,
    merge_and_deserialize,
    msgpack_decode_default,
)
from distributed.utils import offload

from asynciocomm.serialization import arrays, internals, selfcheck
from asynciocomm.serialization.arrays import NOT_FAST, read_array
from asynciocomm.serialization.stock import FALLBACK, stock_frames
from asynciocomm.serialization.metering import unobserved
from asynciocomm.serialization.packing import (
    Hook,
    NeedsFallback,
    Offload,
    joined,
    log_unserializable,
    resume,
    second_pass,
    type_error_text,
)

_MARK = b"__"
# A private name (asynciocomm.serialization.internals): where it is missing, asynciocomm.serialization.choice
# gives comms distributed's own path, and nothing here is called.
msgpack_opts: Any = internals.MSGPACK_OPTS or {}
_UNPACK_OPTS = dict(use_list=False, **msgpack_opts)
#: Whether distributed's msgpack options are the ones the hook-free fast path
#: spells out as literal keywords (those of 2026.8 and later). A ``**`` call
#: builds a dict per message: 323 ns against 196 ns for a 77-byte message.
_PLAIN_OPTS = msgpack_opts == {"strict_map_key": False, "raw": False}
_unpackb = msgpack.unpackb
_decompress = unobserved(decompress)
_merge = unobserved(merge_and_deserialize)
#: distributed's logger for a failed deserialization, so that it reads the same.
_core_logger = logging.getLogger("distributed.protocol.core")


class MessageCodec:
    """Per-comm fast (de)serializer. One instance per comm: the msgpack Packer
    keeps an internal buffer and its hook collects sub-frames, so it must not be
    shared across threads. The hook holds no lasting reference to the comm or
    this instance: no reference cycle keeps a dropped comm alive until the
    garbage collector runs (its finalizer closes it)."""

    __slots__ = ("_packer", "_hook", "_pending")

    def __init__(self) -> None:
        self._hook = Hook()
        self._packer = msgpack.Packer(use_bin_type=True, default=self._hook.encode)
        #: (message, sub-frames made, second pass) of a message dumps() began
        #: and fallback() finishes in the offload thread.
        self._pending: tuple[Any, list[Any], bool, int] | None = None

    def dumps(
        self,
        msg: Any,
        comm: Any = None,
        serializers: Any = None,
        on_error: str | None = "message",
    ) -> bytes | list[Any] | Any:
        """distributed's frames for ``msg``: the one frame as ``bytes``, a list
        when there are sub-frames, or FALLBACK (then call :meth:`fallback`).
        ``comm`` (with the write's ``serializers`` and ``on_error``) supplies the
        context that ``Serialize`` sub-frames need; without it they make it
        FALLBACK. Raises, after distributed's logs, what distributed's path
        would raise for a message that failed after something was pickled."""
        hook = self._hook
        if comm is not None:
            hook.msg = msg
            hook.comm = comm
            hook.serializers = serializers
            hook.on_error = on_error
        sub = hook.sub
        try:
            head = self._packer.pack(msg)  # packing.pack(), inlined: one call less per message
        except Exception as e:  # the packer resets
            if isinstance(e, NeedsFallback) or not (sub or hook.failed):
                sub.clear()
                return FALLBACK  # nothing pickled or serialized: distributed does it all, once
            return self._recover(msg, type_error_text(e))
        finally:
            if comm is not None:
                hook.reset()
        return joined(head, sub) if sub else head

    def _recover(self, msg: Any, type_error: str | None) -> Any:
        """Called in the ``except`` block of a failed first pass (see
        :func:`asynciocomm.serialization.packing.second_pass`)."""
        hook = self._hook
        start = len(hook.sub)  # where a second pass's sub-frames begin
        try:
            return second_pass(self._packer, hook, msg, type_error)
        except Offload:
            self._pending = (msg, hook.sub.copy(), hook.safe, start if hook.safe else 0)
            return FALLBACK
        except Exception:
            log_unserializable(msg)
            raise
        finally:
            hook.sub.clear()

    async def fallback(
        self, msg: Any, comm: Any, serializers: Any = None, on_error: str | None = "message"
    ) -> list[Any]:
        """The frames of a message :meth:`dumps` returned FALLBACK for (call it
        at once): ``to_frames``' own, or, for a message begun here that
        ``to_frames`` would offload, the rest of it in the offload thread."""
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] is msg:
            return await offload(resume, msg, comm, serializers, on_error, *pending[1:])
        return await stock_frames(msg, comm, serializers, on_error)

    @staticmethod
    def loads(
        frames: list[memoryview], nbytes: int, deserialize: bool, deserializers: Any
    ) -> Any:
        """The message, or FALLBACK when it needs offloading (large, deserialized)."""
        threshold = _comm_utils.OFFLOAD_THRESHOLD  # distributed's, as it is now
        if threshold and deserialize and nbytes > threshold:
            return loads_copy_free(frames, threshold, deserializers)
        if len(frames) == 1:
            frame = frames[0]
            obj = frame.obj if isinstance(frame, memoryview) else frame
            if isinstance(obj, (bytes, bytearray)) and len(obj) == nbytes:
                if obj.find(_MARK) < 0:  # find(): 88 ns, ``in``: 145 ns
                    if _PLAIN_OPTS:
                        return _unpackb(obj, use_list=False, raw=False, strict_map_key=False)
                    return _unpackb(obj, **_UNPACK_OPTS)
        return loads(frames, deserialize, deserializers)


class _NotCopyFree(Exception):
    """Raised by the decode hook of :func:`loads_copy_free`."""


def loads_copy_free(frames: list[Any], threshold: int, deserializers: Any) -> Any:
    """A message above the offload threshold, read here if all it holds besides
    msgpack of at most ``threshold`` bytes is arrays the read fast path takes
    from writable frames (:func:`asynciocomm.serialization.arrays.read_array`: a view of the
    frame, no copy, nothing decompressed or unpickled); else FALLBACK, and
    ``from_frames`` offloads it. Reading such an array costs a few
    microseconds at any size, under the GIL wherever it runs, so the offload
    thread's round trip would buy the loop nothing (the same rule as the
    write side's, ``Hook._offload_rule``). Anything else, a failure included,
    is left to distributed's steps, which log and raise it their own way."""
    head = frames[0]
    if len(head) > threshold:
        return FALLBACK  # unpacking that much is work to offload

    def decode(obj: dict[str, Any]) -> Any:
        offset = obj.get("__Serialized__", 0)
        if offset > 0:
            if offset + 1 >= len(frames) or memoryview(frames[offset + 1]).readonly:
                raise _NotCopyFree  # distributed's deserializer would copy it
            array, _ = read_array(frames, offset, deserializers)
            if array is NOT_FAST:
                raise _NotCopyFree
            return array
        if obj.get("__Pickled__", 0) > 0:
            raise _NotCopyFree
        return msgpack_decode_default(obj)

    try:
        return msgpack.loads(head, object_hook=decode, **_UNPACK_OPTS)
    except Exception:
        return FALLBACK


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


def _verify_arrays(numpy: Any) -> str | None:
    return selfcheck.array_difference(MessageCodec, numpy)


arrays.set_self_check(_verify_arrays, selfcheck.report)

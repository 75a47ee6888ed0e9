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
  before anything was pickled or serialized gets a ``Continuation`` of
  ``to_frames``, offload and all, which the comm awaits. Once something was,
  distributed's next steps run here instead of starting over
  (:mod:`asynciocomm.serialization.recovery`): on a ``TypeError`` its second pass
  (whatever msgpack cannot take is pickled), then its logs and the error; a
  message that ``to_frames`` would offload gets a ``Continuation`` that packs it
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
  threshold; larger ones give a ``Continuation`` of ``from_frames``, which
  offloads them, unless all they hold besides a small msgpack head is
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

from asynciocomm.log import PROTOCOL_CORE
from asynciocomm.serialization import internals, recovery
from asynciocomm.serialization.arrays import NOT_FAST, read_array
from asynciocomm.serialization.continuation import Continuation
from asynciocomm.serialization.metering import unobserved
from asynciocomm.serialization.packing import Hook, NeedsFallback, Offload, joined
from asynciocomm.serialization.stock import stock_frames, stock_message

_MARK = b"__"
# A private name (asynciocomm.serialization.internals): where it is missing,
# asynciocomm.serialization.choice
# gives comms distributed's own path, and nothing here is called.
msgpack_opts: Any = internals.MSGPACK_OPTS or {}
_UNPACK_OPTS: Any = internals.UNPACK_OPTS
#: Whether distributed's msgpack options are the ones the hook-free fast path
#: spells out as literal keywords (those of 2026.8 and later). A ``**`` call
#: builds a dict per message: 323 ns against 196 ns for a 77-byte message.
_PLAIN_OPTS = msgpack_opts == {"strict_map_key": False, "raw": False}
_unpackb = msgpack.unpackb
_decompress = unobserved(decompress)
_merge = unobserved(merge_and_deserialize)


class MessageCodec:
    """Per-comm fast (de)serializer. One instance per comm: the msgpack Packer
    keeps an internal buffer and its hook collects sub-frames, so it must not be
    shared across threads. The hook holds no lasting reference to the comm or
    this instance: no reference cycle keeps a dropped comm alive until the
    garbage collector runs (its finalizer closes it)."""

    __slots__ = ("_packer", "_hook")

    def __init__(self) -> None:
        self._hook = Hook()
        self._packer = msgpack.Packer(use_bin_type=True, default=self._hook.encode)

    def dumps(
        self,
        msg: Any,
        comm: Any = None,
        serializers: Any = None,
        on_error: str | None = "message",
    ) -> bytes | list[Any] | Continuation:
        """distributed's frames for ``msg``: the one frame as ``bytes``, a list
        when there are sub-frames, or a :class:`Continuation` that gives them
        when awaited (distributed's ``to_frames``, or the offloaded rest of a
        message begun here). ``comm`` (with the write's ``serializers`` and
        ``on_error``) supplies the context that ``Serialize`` sub-frames need;
        without it they are left to ``to_frames``, which needs the comm too.
        Raises, after distributed's logs, what distributed's path would raise
        for a message that failed after something was pickled."""
        hook = self._hook
        if comm is not None:
            hook.msg = msg
            hook.comm = comm
            hook.serializers = serializers
            hook.on_error = on_error
        sub = hook.sub
        try:
            try:
                head = self._packer.pack(msg)  # packing.pack(), inlined: one call less
            except Exception as e:  # the packer resets
                if isinstance(e, NeedsFallback) or not (sub or hook.failed):
                    sub.clear()  # nothing pickled or serialized: distributed does it all, once
                    return Continuation(stock_frames, msg, comm, serializers, on_error)
                if isinstance(e, Offload):
                    return self._offloaded(msg, 0)
                if not recovery.packs_again(hook, e):
                    sub.clear()
                    recovery.log_unserializable(msg, e)
                    raise
                type_error = str(e)
            else:
                return joined(head, sub) if sub else head
            return self._second_pass(msg, type_error)
        finally:
            if comm is not None:
                hook.reset()

    def _second_pass(self, msg: Any, type_error: str) -> bytes | list[Any] | Continuation:
        """distributed's second pass of a message whose first raised a TypeError."""
        hook = self._hook
        start = len(hook.sub)  # where the second pass's sub-frames begin
        try:
            return recovery.second_pass(self._packer, hook, msg, type_error)
        except Offload:
            return self._offloaded(msg, start)
        except Exception as e:
            recovery.log_unserializable(msg, e)
            raise
        finally:
            hook.sub.clear()

    def _offloaded(self, msg: Any, start: int) -> Continuation:
        """The rest of a message ``to_frames`` would offload, for the offload
        thread, with the sub-frames made so far (the pass's from ``start``)."""
        hook = self._hook
        done = hook.sub.copy()
        hook.sub.clear()
        return Continuation(offload, recovery.resume, msg, hook.comm, hook.serializers,
                            hook.on_error, done, hook.safe, start)

    @staticmethod
    def loads(
        frames: list[memoryview], nbytes: int, deserialize: bool, deserializers: Any,
        allow_offload: bool = True,
    ) -> Any:
        """The message, or a :class:`Continuation` of ``from_frames`` where it
        needs offloading (large, deserialized)."""
        threshold = _comm_utils.OFFLOAD_THRESHOLD  # distributed's, as it is now
        if threshold and deserialize and nbytes > threshold:
            message = loads_copy_free(frames, threshold, deserializers)
            if message is _NOT_HERE:
                return Continuation(stock_message, frames, deserialize, deserializers,
                                    allow_offload)
            return message
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


#: What :func:`loads_copy_free` returns for a message it leaves to ``from_frames``.
_NOT_HERE: Any = object()


def loads_copy_free(frames: list[Any], threshold: int, deserializers: Any) -> Any:
    """A message above the offload threshold, read here if all it holds besides
    msgpack of at most ``threshold`` bytes is arrays the read fast path takes
    from writable frames (:func:`asynciocomm.serialization.arrays.read_array`: a view of the
    frame, no copy, nothing decompressed or unpickled); else ``_NOT_HERE``, and
    ``from_frames`` offloads it. Reading such an array costs a few
    microseconds at any size, under the GIL wherever it runs, so the offload
    thread's round trip would buy the loop nothing (the same rule as the
    write side's, ``Hook._offload_rule``). Anything else, a failure included,
    is left to distributed's steps, which log and raise it their own way."""
    head = frames[0]
    if len(head) > threshold:
        return _NOT_HERE  # unpacking that much is work to offload

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
        return _NOT_HERE


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
        PROTOCOL_CORE.critical("Failed to deserialize", exc_info=True)
        raise

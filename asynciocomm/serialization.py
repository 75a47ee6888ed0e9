"""A faster path through distributed's serialization, with identical bytes.

Most scheduler traffic is small msgpack-only messages (``task-finished``,
``heartbeat``, ``task-erred``, stream batches of plain dicts). For them
``distributed.comm.utils.to_frames`` spends more time deciding whether to offload
(``dask.sizeof`` walks the message) and building closures than msgpack spends
packing, and ``from_frames`` calls a Python ``object_hook`` for every dict.

* **Write.** :meth:`MessageCodec.dumps` packs the message with one persistent
  msgpack ``Packer(use_bin_type=True)`` whose ``default`` hook mirrors
  distributed's ``_encode_default`` for the cases that need no context:
  ``ToPickle`` (a task's ``run_spec`` in every ``compute-task``), sets and enums.
  The frames are then exactly those of ``distributed.protocol.dumps``.
  ``Serialize``, ``Serialized``, ``Pickled``, a ``ToPickle`` that yields
  out-of-band pickle buffers (they would be compressed), and anything that fails
  make it return FALLBACK, and the comm calls ``to_frames``, offload and all.

  This path skips ``to_frames``' offload decision, ``safe_sizeof`` over the
  whole message. On the scheduler's ``compute-task`` batches that walk costs
  11 µs per message, more than pickling the task spec (4 µs) and packing the
  rest together; the walk itself runs on the event loop. msgpack and pickle of
  in-band Python objects hold the GIL, so a thread would free the loop little.
  The one loss is a ``ToPickle`` of a huge in-band object graph (which
  ``safe_sizeof`` samples cheaply and the stock comm would pickle in a thread):
  here it is pickled on the loop.
* **Read.** :meth:`MessageCodec.loads` handles one-frame messages below the
  offload threshold. distributed's hook only acts on dicts carrying one of the
  markers ``__Enum__``, ``__Set__``, ``__Serialized__``, ``__Pickled__``; a frame
  without ``__`` anywhere in its bytes cannot contain one, so it is unpacked with
  no hook at all. Other messages go to distributed's ``loads`` (still without the
  ``from_frames`` coroutine and its size sum, when small).
"""

from __future__ import annotations

import functools
import pickle
from typing import Any

import cloudpickle
import msgpack
from distributed.comm.utils import OFFLOAD_THRESHOLD
from distributed.protocol import loads as _dist_loads
from distributed.protocol.pickle import HIGHEST_PROTOCOL as _HIGHEST
from distributed.protocol.pickle import dumps as _pickle_dumps
from distributed.protocol.serialize import (
    Pickled,
    Serialize,
    Serialized,
    ToPickle,
    msgpack_encode_default,
)
from distributed.protocol.utils import msgpack_opts

#: Marker meaning "use distributed's general path for this message".
FALLBACK: Any = object()

_MARK = b"__"
_UNPACK_OPTS = dict(use_list=False, **msgpack_opts)
_OFFLOAD = OFFLOAD_THRESHOLD or 0


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


def _encode_default(sub: list[bytes], obj: Any) -> Any:
    """distributed's ``_encode_default`` for the context-free cases; sub-frames
    go to ``sub``, whose item 0 is the place of the head frame."""
    if isinstance(obj, ToPickle):
        pickled = _pickle_inband(obj.data)
        if not sub:
            sub.append(b"")
        offset = len(sub)
        # The keys and their order are those distributed writes.
        sub.append(msgpack.dumps(
            {"pickled-obj": pickled, "compression": (), "num-sub-frames": 0}))
        return {"__Pickled__": offset}
    if isinstance(obj, (Serialize, Serialized, Pickled)):
        raise _NeedsFallback
    return msgpack_encode_default(obj)  # sets, enums; else obj -> TypeError


class MessageCodec:
    """Per-comm fast (de)serializer. One instance per comm: the msgpack Packer
    keeps an internal buffer and its hook collects sub-frames in a list of this
    instance, so it must not be shared across threads. The hook holds that list,
    not the instance: no reference cycle keeps a dropped comm alive until the
    garbage collector runs (its finalizer closes it)."""

    __slots__ = ("_packer", "_sub")

    def __init__(self) -> None:
        self._sub: list[bytes] = []
        self._packer = msgpack.Packer(
            use_bin_type=True, default=functools.partial(_encode_default, self._sub))

    def dumps(self, msg: Any) -> bytes | list[bytes] | Any:
        """distributed's frames for ``msg``: the one frame as ``bytes``, a list
        when there are sub-frames, or FALLBACK."""
        sub = self._sub
        try:
            head = self._packer.pack(msg)
        except Exception:  # _NeedsFallback, TypeError, pickling errors; the packer resets
            sub.clear()
            return FALLBACK
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
                if _MARK not in obj:
                    return msgpack.loads(obj, **_UNPACK_OPTS)
        return _dist_loads(frames, deserialize=deserialize, deserializers=deserializers)

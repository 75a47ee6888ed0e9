"""A faster path through distributed's serialization, with identical bytes.

Most scheduler traffic is small msgpack-only messages (``task-finished``,
``heartbeat``, ``task-erred``, stream batches of plain dicts). For them
``distributed.comm.utils.to_frames`` spends more time deciding whether to offload
(``dask.sizeof`` walks the message) and building closures than msgpack spends
packing, and ``from_frames`` calls a Python ``object_hook`` for every dict.

* **Write.** :meth:`MessageCodec.dumps` packs the message with a plain msgpack
  ``Packer(use_bin_type=True)``. When the message holds only msgpack-native types,
  distributed's ``dumps`` would produce exactly this one frame (its ``default``
  hook is never called), so the bytes are identical. Anything else (``Serialize``,
  ``ToPickle``, sets, enums, numpy, ...) makes msgpack raise and the comm falls
  back to ``to_frames``, offload and all. Packing a plain message inline skips the
  offload decision: msgpack holds the GIL while it packs, so a thread would not
  free the event loop anyway.
* **Read.** :meth:`MessageCodec.loads` handles one-frame messages below the
  offload threshold. distributed's hook only acts on dicts carrying one of the
  markers ``__Enum__``, ``__Set__``, ``__Serialized__``, ``__Pickled__``; a frame
  without ``__`` anywhere in its bytes cannot contain one, so it is unpacked with
  no hook at all. Other messages go to distributed's ``loads`` (still without the
  ``from_frames`` coroutine and its size sum, when small).
"""

from __future__ import annotations

from typing import Any

import msgpack
from distributed.comm.utils import OFFLOAD_THRESHOLD
from distributed.protocol import loads as _dist_loads
from distributed.protocol.utils import msgpack_opts

#: Marker meaning "use distributed's general path for this message".
FALLBACK: Any = object()

_MARK = b"__"
_UNPACK_OPTS = dict(use_list=False, **msgpack_opts)
_OFFLOAD = OFFLOAD_THRESHOLD or 0


class MessageCodec:
    """Per-comm fast (de)serializer. One instance per comm: a msgpack Packer
    keeps an internal buffer and must not be shared across threads."""

    __slots__ = ("_packer",)

    def __init__(self) -> None:
        self._packer = msgpack.Packer(use_bin_type=True)

    def dumps(self, msg: Any) -> bytes | Any:
        """The single frame distributed would produce, or FALLBACK."""
        try:
            return self._packer.pack(msg)
        except Exception:  # TypeError for non-native types; the packer resets
            return FALLBACK

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

"""One message packed as ``distributed.protocol.dumps`` packs it.

:class:`Hook` is the ``default`` of a persistent msgpack ``Packer``:
distributed's ``_encode_default``, with the sub-frames of ``ToPickle``,
``Pickled``, ``Serialize`` and ``Serialized`` built step for step as there
(``create_pickled_sub_frames``, ``create_serialized_sub_frames``), in the same
order, with the same metered steps. :class:`Replay` is the hook of a message
packed again in the offload thread, with the sub-frames made on the loop taken
as they are. What happens when a pass fails is
:mod:`asynciocomm.serialization.recovery`'s.
"""

from __future__ import annotations

from typing import Any

import msgpack
from distributed.comm import utils as _comm_utils
from distributed.protocol.compression import maybe_compress
from distributed.protocol.serialize import (
    Pickled,
    Serialize,
    Serialized,
    ToPickle,
    msgpack_encode_default,
)
from distributed.utils import ensure_memoryview

from asynciocomm.serialization import internals
from asynciocomm.serialization.arrays import copy_free_nbytes, split_serialized
from asynciocomm.serialization.metering import unobserved
from asynciocomm.serialization.pickling import pickle_dumps
from asynciocomm.serialization.sizing import message_size

# Private names (asynciocomm.serialization.internals): where one is missing,
# asynciocomm.serialization.choice
# gives comms distributed's own path, and nothing here is called.
_is_msgpack_serializable: Any = internals.IS_MSGPACK_SERIALIZABLE
_UNPACK_OPTS: Any = internals.UNPACK_OPTS
_compress = unobserved(maybe_compress)


class NeedsFallback(Exception):
    """Raised inside the msgpack hook: this object needs distributed's path."""


class Offload(Exception):
    """Raised at the first ``Serialize`` of a message ``to_frames`` would offload."""


class Hook:
    """The packer's ``default``: distributed's ``_encode_default``, with the
    state of the message being packed. Sub-frames go to ``sub``, whose item 0 is
    the place of the head frame. ``comm`` is set only while a message is packed
    (a lasting reference would make a cycle through the comm's codec). ``safe``:
    distributed's second pass, in which what msgpack cannot take is pickled.
    ``failed``: a pickle or serialization of this message raised. ``over``:
    the bytes by which the message exceeds distributed's offload threshold,
    and ``free``: the bytes of its copy-free arrays serialized so far in this
    pass (see ``_offload_rule``)."""

    __slots__ = ("sub", "msg", "comm", "serializers", "on_error", "context", "sized", "safe",
                 "failed", "over", "free")

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
        self.safe = False
        self.failed = False
        self.over = 0
        self.free = 0

    def encode(self, obj: Any) -> Any:
        """The hook itself: msgpack calls it for every object it cannot pack."""
        if isinstance(obj, ToPickle):
            try:
                pickled, buffers = pickle_dumps(obj.data)
                frames = self._buffer_frames(pickled, buffers) if buffers else None
            except BaseException:
                self.failed = True
                raise
            sub = self.sub  # _chunk(), inlined: one per task in a compute-task batch
            if not sub:
                sub.append(b"")
            offset = len(sub)
            if frames is None:
                # The keys and their order are those distributed writes.
                sub.append(msgpack.dumps(
                    {"pickled-obj": pickled, "compression": (), "num-sub-frames": 0}))
            else:
                sub += frames
            return {"__Pickled__": offset}
        if isinstance(obj, (Serialize, Serialized)):
            frames = self._serialized_sub_frames(obj)
            sub = self.sub  # _chunk(), inlined: one per array in a data message
            if not sub:
                sub.append(b"")
            offset = len(sub)
            sub += frames
            return {"__Serialized__": offset}
        if isinstance(obj, Pickled):
            header = obj.header
            header["num-sub-frames"] = len(obj.frames)
            return self._chunk("__Pickled__", [msgpack.dumps(header)] + obj.frames)
        encoded = msgpack_encode_default(obj)  # sets, enums; else obj -> TypeError
        if self.safe and encoded is obj and not _is_msgpack_serializable(obj):
            return self.encode(ToPickle(obj))
        return encoded

    def _chunk(self, key: str, frames: list[Any]) -> dict[str, int]:
        sub = self.sub
        if not sub:
            sub.append(b"")
        offset = len(sub)
        sub += frames
        return {key: offset}

    def _buffer_frames(self, pickled: bytes, buffers: list[Any]) -> list[Any]:
        """``create_pickled_sub_frames`` of a pickle with out-of-band buffers."""
        frames = [ensure_memoryview(b) for b in buffers]
        compression = _compress_frames(frames, [None] * len(frames), self._context())
        # The keys and their order are those distributed writes.
        header = {"pickled-obj": pickled, "compression": compression, "num-sub-frames": len(frames)}
        return [msgpack.dumps(header)] + frames

    def _context(self) -> dict[str, Any] | None:
        """The context ``to_frames`` gets from the comm (None without a comm)."""
        context = self.context
        comm = self.comm
        if context is None and comm is not None:
            context = self.context = {
                "sender": comm.local_info,
                "recipient": comm.remote_info,
                **comm.handshake_options,
            }
        return context


    def _serialized_sub_frames(self, obj: Serialize | Serialized) -> list[Any]:
        """distributed's ``create_serialized_sub_frames``, step for step."""
        comm = self.comm
        if comm is None:
            raise NeedsFallback
        if isinstance(obj, Serialized):
            header, frames = obj.header, obj.frames
        else:
            if not self.sized or self.over > self.free:
                self._offload_rule(obj, comm)
            try:
                header, frames = split_serialized(
                    obj,
                    serializers=self.serializers,
                    on_error=self.on_error,
                    context=self._context(),
                    size=comm.max_shard_size,
                )
                compression = list(header.get("compression", [None] * len(frames)))
                header["compression"] = _compress_frames(frames, compression, self.context)
            except BaseException:
                self.failed = True
                raise
        header["num-sub-frames"] = len(frames)
        return [msgpack.dumps(header, default=msgpack_encode_default, use_bin_type=True)] + frames

    def _offload_rule(self, obj: Serialize, comm: Any) -> None:
        """Raise Offload where ``to_frames`` would offload, with one exception.

        ``to_frames``' rule is taken at the first ``Serialize``, before anything
        is serialized: ``safe_sizeof`` of the whole message above the live
        ``OFFLOAD_THRESHOLD``. Except that the bytes of copy-free arrays (see
        :func:`asynciocomm.serialization.arrays.copy_free_nbytes`) do not count: serializing
        one costs a few microseconds whatever its size, under the GIL, in the
        offload thread as on the loop, so offloading it frees the loop of
        nothing and costs the thread's round trip (on a 16 MiB message, the
        sender's CPU goes up by about 10 %). So a message stays on the loop
        as long as its ``Serialize`` objects so far are copy-free arrays, and
        from the point where what they leave is at most the threshold; the
        first other one before that point raises Offload, and the rest of the
        message (those arrays' sub-frames taken as they are) is serialized in
        the offload thread, as ``to_frames`` would serialize it all."""
        if not self.sized:
            self.sized = True
            threshold = _comm_utils.OFFLOAD_THRESHOLD
            if not (threshold and comm.allow_offload):
                return
            size = message_size(self.msg)  # safe_sizeof's number
            if size == -1:
                raise Offload
            self.over = size - threshold
            if self.over <= 0:
                return
        nbytes = copy_free_nbytes(obj, self.serializers, self._context())
        if nbytes < 0:
            raise Offload
        self.free += nbytes


def _compress_frames(frames: list[Any], compression: list[Any], context: Any) -> tuple[Any, ...]:
    """distributed's ``_inplace_compress_frames``: ``frames`` compressed in
    place with ``context``'s compression, and the header's ``compression``."""
    opts = {"compression": context["compression"]} if context and "compression" in context else {}
    for i in range(len(frames)):
        if compression[i] is None:
            compression[i], frames[i] = _compress(frames[i], **opts)
    return tuple(compression)


class Replay(Hook):
    """The hook of a message packed again in the offload thread, after the event
    loop had begun it: the sub-frames made there (``done``) are taken as they
    are. msgpack calls the hook in the same order each time, so the chunk at each
    offset is the one the same object made."""

    __slots__ = ("done",)

    def __init__(self, done: list[Any]) -> None:
        super().__init__()
        self.done = done

    def encode(self, obj: Any) -> Any:
        sub = self.sub
        offset = len(sub) or 1
        if offset < len(self.done) and (
            isinstance(obj, (ToPickle, Pickled, Serialize, Serialized))
            or self.safe and msgpack_encode_default(obj) is obj
            and not _is_msgpack_serializable(obj)
        ):
            n = msgpack.loads(self.done[offset], **_UNPACK_OPTS)["num-sub-frames"]
            key = "__Serialized__" if isinstance(obj, (Serialize, Serialized)) else "__Pickled__"
            return self._chunk(key, self.done[offset : offset + 1 + n])
        return super().encode(obj)


def joined(head: bytes, sub: list[Any]) -> list[Any]:
    """All frames of a message with sub-frames; ``sub`` is emptied."""
    frames = sub.copy()
    sub.clear()
    frames[0] = head
    return frames


def pack(packer: msgpack.Packer, hook: Hook, msg: Any) -> bytes | list[Any]:
    """One pass: the head frame alone, or all frames with sub-frames."""
    head = packer.pack(msg)
    return joined(head, hook.sub) if hook.sub else head

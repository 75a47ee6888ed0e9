"""distributed's own path for a comm's messages.

``FALLBACK`` is what a codec returns for a message it leaves to distributed:
the comm then calls ``to_frames`` (:func:`stock_frames`, with the context the
stock comm passes) or ``from_frames``. :class:`StockCodec` leaves every message
to them: a comm with it (de)serializes exactly as the stock comm does.
"""

from __future__ import annotations

from typing import Any

from distributed.comm.utils import to_frames

#: Marker meaning "use distributed's general path for this message".
FALLBACK: Any = object()


async def stock_frames(
    msg: Any, comm: Any, serializers: Any = None, on_error: str | None = "message"
) -> list[Any]:
    """``to_frames`` of ``msg`` as the stock comm's ``write`` calls it."""
    return await to_frames(  # type: ignore[no-any-return]
        msg,
        allow_offload=comm.allow_offload,
        serializers=serializers,
        on_error=on_error,
        context={
            "sender": comm.local_info,
            "recipient": comm.remote_info,
            **comm.handshake_options,
        },
        frame_split_size=comm.max_shard_size,
    )


class StockCodec:
    """A codec (the interface of :class:`asynciocomm.serialization.fast.MessageCodec`)
    that leaves every message to distributed's ``to_frames`` and ``from_frames``."""

    __slots__ = ()

    def dumps(
        self, msg: Any, comm: Any = None, serializers: Any = None,
        on_error: str | None = "message",
    ) -> Any:
        return FALLBACK

    async def fallback(
        self, msg: Any, comm: Any, serializers: Any = None, on_error: str | None = "message"
    ) -> list[Any]:
        return await stock_frames(msg, comm, serializers, on_error)

    @staticmethod
    def loads(frames: list[Any], nbytes: int, deserialize: bool, deserializers: Any) -> Any:
        return FALLBACK

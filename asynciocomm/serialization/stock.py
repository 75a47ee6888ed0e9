"""distributed's own path for a comm's messages.

:func:`stock_frames` and :func:`stock_message` are ``to_frames`` and
``from_frames`` as the stock comm calls them (with its context, its shard size
and its offload rule). A codec that leaves a message to them returns a
:class:`~asynciocomm.serialization.continuation.Continuation` of one, which the
comm awaits. :class:`StockCodec` leaves every message to them: a comm with it
(de)serializes exactly as the stock comm does.
"""

from __future__ import annotations

from typing import Any

from distributed.comm.utils import from_frames, to_frames

from asynciocomm.serialization.continuation import Continuation


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


async def stock_message(frames: list[Any], deserialize: bool, deserializers: Any,
                        allow_offload: bool) -> Any:
    """``from_frames`` of ``frames`` as the stock comm's ``read`` calls it."""
    return await from_frames(
        frames, deserialize=deserialize, deserializers=deserializers,
        allow_offload=allow_offload,
    )


class StockCodec:
    """A codec (the interface of :class:`asynciocomm.serialization.fast.MessageCodec`)
    that leaves every message to distributed's ``to_frames`` and ``from_frames``."""

    __slots__ = ()

    def dumps(
        self, msg: Any, comm: Any = None, serializers: Any = None,
        on_error: str | None = "message",
    ) -> Continuation:
        return Continuation(stock_frames, msg, comm, serializers, on_error)

    @staticmethod
    def loads(frames: list[Any], nbytes: int, deserialize: bool, deserializers: Any,
              allow_offload: bool = True) -> Continuation:
        return Continuation(stock_message, frames, deserialize, deserializers, allow_offload)

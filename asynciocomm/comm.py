"""The Comm: distributed's message-level API on top of :class:`FramedProtocol`."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from distributed.comm.core import Comm

from asynciocomm.errors import closed_here, truncated
from asynciocomm.log import get_logger
from asynciocomm.protocol import FramedProtocol
from asynciocomm.serialization.choice import new_codec
from asynciocomm.serialization.continuation import Continuation
from asynciocomm.wire.limits import C_INT_MAX

logger = get_logger(__name__)


def _finalize(protocol: FramedProtocol, r: str) -> None:
    """A comm dropped without close() or abort(). It is dangling, and warned
    about as the stock comm warns, only if its connection has not ended: a
    comm whose peer has gone, which distributed drops once ``closed()`` says
    so, is not. Either way nothing of it stays open."""
    if protocol.is_closed:
        return
    if not protocol.ended:
        logger.warning("Closing dangling comm %s", r)
    try:
        protocol.abort()
    except RuntimeError:  # the event loop is already closed
        pass


class AsyncioComm(Comm):
    """An established connection of asynciocomm (any of its schemes).

    Semantics follow the stock tcp comm: ``read()`` returns every message that
    arrived before the peer closed, then raises ``CommClosedError``; a failed or
    cancelled read, or a failed write, aborts the comm (its stream state is
    unknown then); a write cancelled while it waits for flow control has queued
    nothing and leaves the comm as it was; ``close()`` delivers everything
    written before it; a comm that is never closed is aborted by a finalizer,
    with a warning.
    """

    def __init__(
        self,
        protocol: FramedProtocol,
        local_addr: str,
        peer_addr: str,
        deserialize: bool = True,
    ) -> None:
        self._closed = False
        self._reading = False
        super().__init__(deserialize=deserialize)
        self._protocol = protocol
        self._local_addr = local_addr
        self._peer_addr = peer_addr
        self._codec = new_codec()
        self._extra: dict[str, Any] = {}
        shard = protocol.settings.shard
        if protocol.tls:
            self._extra["peercert"] = protocol.extra_info("peercert")
            self._extra["cipher"] = protocol.extra_info("cipher")
            shard = min(shard, C_INT_MAX)  # OpenSSL takes int lengths
        self.max_shard_size = shard
        protocol.name = f"{type(self).__name__} {local_addr} <-> {peer_addr}"
        self._finalizer = weakref.finalize(self, _finalize, protocol, repr(self))
        self._finalizer.atexit = False

    @property
    def handshake_options(self) -> dict[str, Any]:
        return self._handshake_options

    @handshake_options.setter
    def handshake_options(self, options: dict[str, Any]) -> None:
        # distributed sets them once at the end of its handshake (Comm.__init__
        # sets {} before there is a protocol).
        self._handshake_options = options
        protocol = getattr(self, "_protocol", None)
        if protocol is not None:
            protocol.handshaken()

    @property
    def local_address(self) -> str:
        return self._local_addr

    @property
    def peer_address(self) -> str:
        return self._peer_addr

    @property
    def extra_info(self) -> dict[str, Any]:
        return self._extra

    def closed(self) -> bool:
        # As the stock comm: True once closed here, or once the connection has
        # ended and every message that arrived before the end has been read.
        return self._closed or self._protocol.finished

    async def read(self, deserializers: Any = None) -> Any:
        if self._closed:
            raise closed_here(self)
        protocol = self._protocol
        try:
            item = protocol.read_nowait()
            if item is None:
                if self._reading:
                    # One reader at a time (the Comm contract). The stock comm
                    # raises tornado's AssertionError("Already reading") and
                    # aborts; so do we, which wakes the pending read too.
                    raise AssertionError(
                        f"Already reading: in {self}, another read() is pending"
                    )
                self._reading = True
                try:
                    while item is None:
                        await protocol.readable()
                        item = protocol.read_nowait()
                finally:
                    self._reading = False
        except BaseException:
            # Closed, cancelled or failed mid-read: the stream state is unknown,
            # so the only safe thing is to abort (as the stock comm does).
            self.abort()
            raise
        frames, nbytes = item
        try:
            msg = self._codec.loads(frames, nbytes, self.deserialize, deserializers,
                                    self.allow_offload)
            if msg.__class__ is Continuation:
                msg = await msg
        except EOFError:
            self.abort()
            raise truncated(self)
        finally:
            protocol.delivered()
        return msg

    async def write(
        self, msg: Any, serializers: Any = None, on_error: str | None = "message"
    ) -> int:
        if self._closed:
            raise closed_here(self)
        frames = self._codec.dumps(msg, self, serializers, on_error)
        if frames.__class__ is Continuation:
            frames = await frames
        sent = self._protocol.send(frames)  # a TypeError leaves the comm as it is
        if sent.__class__ is int:
            return sent  # type: ignore[return-value]
        try:
            return await sent  # type: ignore[misc]
        except asyncio.CancelledError:
            # Cancelled while it waited its turn: nothing of the message was
            # queued, and the writers before and after it go on (the stock
            # comm, which never waits, cannot be cancelled inside a write).
            raise
        except BaseException:
            # The connection failed under the write: what reached the wire is
            # unknown, so the comm is aborted, as the stock comm does.
            self.abort()
            raise

    async def close(self) -> None:
        if self._closed and self._protocol.is_closed:
            return
        self._closed = True
        self._finalizer.detach()
        try:
            await self._protocol.close()
        except BaseException:
            self._protocol.abort()
            raise

    def abort(self) -> None:
        self._closed = True
        self._finalizer.detach()
        self._protocol.abort()

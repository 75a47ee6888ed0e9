"""The tiny framing used by the raw-socket and bare-protocol references.

A message is a 9-byte header ``<QB`` (payload length, op) and the payload.
``PING`` is echoed whole, ``SINK`` is counted and dropped, ``SYNC`` is
answered with a header whose length field carries the SINK count, ``BYE``
closes the connection. No dask serialization is involved.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

HDR = struct.Struct("<QB")
PING, SINK, SYNC, BYE = 0, 1, 2, 3


class RawServerProtocol(asyncio.Protocol):
    """Server side of the framing on an asyncio/uvloop transport."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.skip = 0
        self.count = 0
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        view = memoryview(data)
        if self.skip:
            n = min(self.skip, len(view))
            self.skip -= n
            view = view[n:]
            if not len(view):
                return
        buf = self.buf
        buf += view
        pos = 0
        while len(buf) - pos >= HDR.size:
            length, op = HDR.unpack_from(buf, pos)
            if op == SINK:
                self.count += 1
                avail = len(buf) - pos - HDR.size
                if avail >= length:
                    pos += HDR.size + length
                    continue
                self.skip = length - avail
                pos = len(buf)
                break
            end = pos + HDR.size + length
            if len(buf) < end:
                break
            if op == PING:
                self.transport.write(bytes(buf[pos:end]))
            elif op == SYNC:
                self.transport.write(HDR.pack(self.count, SYNC))
                self.count = 0
            elif op == BYE:
                self.transport.close()
            pos = end
        del buf[:pos]


class RawClientProtocol(asyncio.Protocol):
    """Client side: sends frames with flow control, awaits PING/SYNC replies."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: Any = None
        self.waiter: asyncio.Future[int] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._paused = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        for fut in (self.waiter, self._drain):
            if fut is not None and not fut.done():
                fut.set_exception(ConnectionError("connection lost"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    async def drain(self) -> None:
        """Wait until the transport is below its high-water mark."""
        if self._paused:
            self._drain = asyncio.get_running_loop().create_future()
            await self._drain

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= HDR.size:
            length, op = HDR.unpack_from(buf, pos)
            end = pos + HDR.size + (length if op == PING else 0)
            if len(buf) < end:
                break
            pos = end
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(length)
        del buf[:pos]

    async def request(self, frame: bytes) -> int:
        """Send one PING or SYNC frame and wait for its reply."""
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(frame)
        return await self.waiter

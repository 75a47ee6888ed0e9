"""The tiny framing used by the raw-socket and bare-protocol references.

A message is a 9-byte header ``<QB`` (payload length, op) and the payload.
``PING`` is echoed whole, ``SINK`` is counted and dropped, ``SYNC`` is
answered with a header whose length field carries the SINK count, ``BYE``
closes the connection. No dask serialization is involved.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from typing import Any

HDR = struct.Struct("<QB")
PING, SINK, SYNC, BYE = 0, 1, 2, 3


class RawServerProtocol(asyncio.Protocol):
    """Server side of the framing on an asyncio/uvloop transport: every message
    is answered inside ``data_received``."""

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
                self.on_message(SINK, b"")
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
            self.on_message(op, bytes(buf[pos:end]) if op == PING else b"")
            pos = end
        del buf[:pos]

    def on_message(self, op: int, frame: bytes) -> None:
        """Answer one message (a PING's ``frame`` is the whole message)."""
        if op == PING:
            self.transport.write(frame)
        elif op == SINK:
            self.count += 1
        elif op == SYNC:
            self.transport.write(HDR.pack(self.count, SYNC))
            self.count = 0
        elif op == BYE:
            self.transport.close()


class RawTaskServerProtocol(RawServerProtocol):
    """The bare server in the Comm API's shape: one task per connection awaits
    every message (as ``await comm.read()`` does) and answers it. Against
    :class:`RawServerProtocol` it adds the task wake-up that any ``Comm`` pays
    per message, and nothing else a comm does."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: deque[tuple[int, bytes]] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.task: asyncio.Task[None] | None = None
        self.eof = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def on_message(self, op: int, frame: bytes) -> None:
        self.messages.append((op, frame))
        self._wake()

    async def read(self) -> tuple[int, bytes] | None:
        """The next message, or None once the connection is gone."""
        while not self.messages:
            if self.eof:
                return None
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        return self.messages.popleft()

    async def _serve(self) -> None:
        while (item := await self.read()) is not None:
            RawServerProtocol.on_message(self, *item)
            if item[0] == BYE:
                break


class RawKeepServerProtocol(asyncio.BufferedProtocol):
    """The bare server that keeps what it receives, as a comm's reader must: each
    payload lands in memory of its own and stays alive until the next message
    has arrived, as a handler that awaits ``comm.read()`` holds its previous
    message meanwhile (the comm servers of this bench do). So two payload
    buffers alternate, reused from message to message: the least memory any
    receiver needs for that pattern.

    Bytes arrive in a small scratch buffer; a payload that does not fit in what
    is left of it is received straight into place once its first bytes are
    copied there (one copy, the kernel's, for the rest).

    :class:`RawServerProtocol` instead drops a SINK payload as it reads it, so
    its 256 KiB of bytes stay in the CPU's cache: on loopback that makes the
    receiving side, and the kernel work it shares with the sender, cheaper than
    any receiver that keeps the bytes."""

    SCRATCH = 64 * 1024  # small messages in bulk, large payloads' first bytes

    def __init__(self) -> None:
        self.scratch = bytearray(self.SCRATCH)
        self.have = 0  # bytes in scratch not yet consumed
        self.payloads = [bytearray(), bytearray()]
        self.turn = 0
        self.target: memoryview | None = None  # the payload being received in place
        self.op = SINK
        self.length = 0
        self.count = 0
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.target is not None:
            return self.target
        return memoryview(self.scratch)[self.have:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.target is not None:
            self.target = self.target[nbytes:]
            if not len(self.target):
                self.target = None
                self._message(self.op, self.length)
            return
        self.have += nbytes
        view = memoryview(self.scratch)
        pos = 0
        while self.have - pos >= HDR.size:
            length, op = HDR.unpack_from(self.scratch, pos)
            body = pos + HDR.size
            payload = self._next_payload(length)
            avail = min(self.have - body, length)
            payload[:avail] = view[body:body + avail]
            pos = body + avail
            if avail < length:
                self.op, self.length = op, length
                self.target = memoryview(payload)[avail:length]
                break
            self._message(op, length)
        rest = self.have - pos
        self.scratch[:rest] = self.scratch[pos:self.have]
        self.have = rest

    def _next_payload(self, length: int) -> bytearray:
        self.turn ^= 1
        if len(self.payloads[self.turn]) < length:
            self.payloads[self.turn] = bytearray(length)
        return self.payloads[self.turn]

    def _message(self, op: int, length: int) -> None:
        # Answered as the other bare servers answer (a PING echoes the whole message).
        frame = HDR.pack(length, PING) + self.payloads[self.turn][:length] if op == PING else b""
        RawServerProtocol.on_message(self, op, frame)  # type: ignore[arg-type]


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

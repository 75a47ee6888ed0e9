"""Helpers shared by the socket-level tests: raw peers, bounded waits, round trips.

Nothing here mocks the transport: raw peers are plain OS sockets on loopback that
speak (or deliberately break) distributed's wire format.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import socket
import struct
import sys
from collections.abc import Awaitable, Iterator
from typing import Any

from distributed.comm import connect
from distributed.comm.core import Comm
from distributed.comm.tcp import _add_frames_header
from distributed.protocol import dumps, loads

from tests.certs import Certs
from tests.variants import Variant, connect_to

#: Upper bound for any single wait (a hang fails the test instead of blocking CI).
WAIT = 30

U64 = struct.Struct("<Q")


def header(prefix: int, lengths: list[int]) -> bytes:
    """A raw frame header: prefix, nframes and the lengths (all little-endian u64)."""
    return struct.pack(f"<QQ{len(lengths)}Q", prefix, len(lengths), *lengths)


def handshake_msg() -> dict[str, Any]:
    """What distributed's Comm.handshake_info() sends between processes on one host."""
    return {
        "compression": None,
        "python": tuple(sys.version_info)[:3],
        "pickle-protocol": pickle.HIGHEST_PROTOCOL,
    }


def encode_msg(msg: Any) -> bytes:
    """``msg`` as the stock tcp comm puts it on the wire."""
    out, _, _ = _add_frames_header(list(dumps(msg)))
    return b"".join(bytes(memoryview(b).cast("B")) for b in out)


def parse_frames(buf: bytearray) -> list[bytes] | None:
    """Pop one complete message's frames from the front of ``buf`` (None: incomplete)."""
    if len(buf) < 16:
        return None
    _, n = struct.unpack_from("<QQ", buf)
    if len(buf) < 16 + 8 * n:
        return None
    lengths = struct.unpack_from(f"<{n}Q", buf, 16)
    end = 16 + 8 * n + sum(lengths)
    if len(buf) < end:
        return None
    frames, pos = [], 16 + 8 * n
    for length in lengths:
        frames.append(bytes(buf[pos : pos + length]))
        pos += length
    del buf[:end]
    return frames


class RawPeer:
    """A raw, non-blocking OS socket connected to a listener (no comm underneath)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(False)
        self.buf = bytearray()

    @classmethod
    def connect(cls, address: str) -> RawPeer:
        """``address`` is a comm address ``scheme://host:port``."""
        from distributed.comm.addressing import get_address_host_port

        host, port = get_address_host_port(address)
        return cls(socket.create_connection((host, port), timeout=WAIT))

    async def send(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.sock_sendall(self.sock, data), WAIT)

    async def read_msg(self) -> Any:
        """Read one complete message (decoded with our decoder, loaded by distributed)."""
        loop = asyncio.get_running_loop()

        async def _read() -> Any:
            while (frames := parse_frames(self.buf)) is None:
                data = await loop.sock_recv(self.sock, 1 << 16)
                if not data:
                    raise EOFError("peer closed")
                self.buf += data
            return loads(frames)

        return await asyncio.wait_for(_read(), WAIT)

    async def handshake(self) -> Any:
        """Complete distributed's handshake (the listener speaks first)."""
        theirs = await self.read_msg()
        await self.send(encode_msg(handshake_msg()))
        return theirs

    async def wait_closed_by_peer(self, timeout: float = WAIT) -> str:
        """Read (and drop) until the peer closes; 'eof' or 'reset'. Fails on timeout."""
        loop = asyncio.get_running_loop()

        async def _drain() -> str:
            while True:
                try:
                    data = await loop.sock_recv(self.sock, 1 << 16)
                except (ConnectionResetError, BrokenPipeError):
                    return "reset"
                if not data:
                    return "eof"

        return await asyncio.wait_for(_drain(), timeout)

    def shutdown_write(self) -> None:
        self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.sock.close()


async def roundtrip(variant: Variant, certs: Certs | None, address: str, **kw: Any) -> None:
    """A well-behaved client connects, exchanges a message and closes."""
    comm = await asyncio.wait_for(
        connect_to(variant, certs, address, timeout=WAIT, **kw), WAIT
    )
    try:
        await comm.write({"op": "ping", "payload": b"x" * 1000})
        got = await asyncio.wait_for(comm.read(), WAIT)
        assert got == {"op": "ping", "payload": b"x" * 1000}
    finally:
        await comm.close()


async def fails_promptly(aw: Awaitable[Any], bound: float = WAIT) -> BaseException:
    """Run ``aw`` (a connect with a much larger ``timeout=``) and return the exception
    it raised. A hang, a success or a failure by time-out fail the test."""
    try:
        result = await asyncio.wait_for(aw, bound)
    except asyncio.TimeoutError as exc:  # also builtins.TimeoutError on 3.11
        raise AssertionError(f"did not fail promptly (waited {bound} s): {exc!r}") from exc
    except BaseException as exc:
        assert "Timed out trying to connect" not in str(exc), exc
        return exc
    if isinstance(result, Comm):
        result.abort()
    raise AssertionError(f"expected a failure, got {result!r}")


async def plain_connect(address: str, timeout: float = 4 * WAIT, **kw: Any) -> Comm:
    return await connect(address, timeout=timeout, **kw)


class WriteSpy:
    """Stands in for a comm's transport on its write side (see :func:`write_spy`):
    forwards everything to the real one and records the size of each write() /
    writelines() call (one entry per call)."""

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        self._real = transport
        self.sizes: list[int] = []
        #: (method, the size of each buffer it was given), per call
        self.calls: list[tuple[str, list[int]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def write(self, data: Any) -> None:
        self.sizes.append(memoryview(data).nbytes)
        self.calls.append(("write", [memoryview(data).nbytes]))
        self._real.write(data)  # type: ignore[attr-defined]

    def writelines(self, buffers: Any) -> None:
        buffers = list(buffers)
        self.sizes.append(sum(memoryview(b).nbytes for b in buffers))
        self.calls.append(("writelines", [memoryview(b).nbytes for b in buffers]))
        self._real.writelines(buffers)  # type: ignore[attr-defined]


@contextlib.contextmanager
def write_spy(comm: Comm) -> Iterator[WriteSpy]:
    """Record every transport write call of an asynciocomm comm, while in the block."""
    sender = comm._protocol._sender  # type: ignore[attr-defined]
    spy = sender._transport = WriteSpy(sender._transport)
    try:
        yield spy
    finally:
        sender._transport = spy._real

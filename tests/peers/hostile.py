"""Hostile peers of the reliability scenarios: the table of hostile inputs (raw
frame headers that lie about sizes, random bytes, truncations), :class:`RawPeer`
that sends them over plain TCP or TLS and watches how the listener drops it, and
idle half-open sockets that never send a byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any

from tests.peers.conn import WAIT

U64 = struct.Struct("<Q")


# -- hostile inputs -------------------------------------------------------------------


def header(prefix: int, lengths: list[int]) -> bytes:
    """Raw frame header: prefix, nframes, lengths (little-endian u64)."""
    return struct.pack(f"<QQ{len(lengths)}Q", prefix, len(lengths), *lengths)


@dataclass(frozen=True)
class Hostile:
    """One hostile input. ``invalid``: a correct reader must abort the connection
    on it (as opposed to waiting for more bytes that will never come)."""

    name: str
    data: bytes
    invalid: bool = True
    claim: int = 0  # bytes the input claims a message needs (0: none)


def hostile_inputs() -> list[Hostile]:
    """The table of hostile inputs (sent as the listener's handshake read)."""
    rnd = random.Random(5)
    return [
        Hostile("random-bytes-4KiB", rnd.randbytes(4096)),
        Hostile("random-bytes-64KiB", rnd.randbytes(65536)),
        Hostile("prefix-2^63", header(2**63, [8]) + b"x" * 8, claim=2**63),
        Hostile("prefix-2^40", header(2**40, [2**40 - 16]), claim=2**40),
        Hostile("nframes-2^63", U64.pack(16) + U64.pack(2**63), claim=2**66),
        Hostile("nframes-2^40", U64.pack(16) + U64.pack(2**40), claim=2**43),
        Hostile("nframes-2^64-1", U64.pack(16) + U64.pack(2**64 - 1), claim=2**67),
        Hostile("framesize-2^63", header(16, [2**63]), claim=2**63),
        Hostile("framesize-2^40", header(16, [2**40]) + b"z" * 4096, claim=2**40),
        Hostile("framesizes-sum-2^64", header(24, [2**63, 2**63]), claim=2**64),
        Hostile("zero-frames", header(8, [])),
        Hostile("prefix-mid-frame", header(24 + 5, [10, 10]) + b"a" * 20),
        # Incomplete but not (yet) invalid: the peer then closes its side.
        Hostile("header-ends-mid-field", header(24, [5])[:12], invalid=False),
        Hostile("header-ends-mid-lengths", header(32, [5, 6, 7])[:30], invalid=False),
        Hostile("truncated-mid-frame", header(16, [1 << 20]) + b"f" * 4096,
                invalid=False, claim=1 << 20),
    ]  # fmt: skip


#: Claims of 2^40 .. 2^63 bytes, for the peak-RSS measurement.
HUGE_CLAIMS = [
    h for h in hostile_inputs() if h.claim >= 2**40
]


# -- raw peers -------------------------------------------------------------------------


def host_port(address: str) -> tuple[str, int]:
    from distributed.comm.addressing import get_address_host_port

    return get_address_host_port(address)


class RawPeer:
    """An asyncio stream to a listener: plain TCP, or TLS with ``ssl_context``.
    Sends whatever it is told; knows nothing of the framing."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(
        cls, address: str, ssl_context: ssl.SSLContext | None = None, timeout: float = WAIT
    ) -> RawPeer:
        host, port = host_port(address)
        kw: dict[str, Any] = {}
        if ssl_context is not None:
            kw = {"ssl": ssl_context, "server_hostname": host}
        r, w = await asyncio.wait_for(asyncio.open_connection(host, port, **kw), timeout)
        return cls(r, w)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await asyncio.wait_for(self.writer.drain(), WAIT)

    async def trickle(self, data: bytes, interval: float) -> str | None:
        """Send one byte every ``interval`` seconds; stop early (returning how the
        connection ended) if the listener drops it."""
        for i in range(len(data)):
            try:
                await self.send(data[i : i + 1])
            except (ConnectionError, OSError, ssl.SSLError):
                return "reset"
            if self.reader.at_eof():
                return "eof"
            await asyncio.sleep(interval)
        return None

    def shutdown_write(self) -> None:
        if self.writer.can_write_eof():
            self.writer.write_eof()
        else:  # TLS: no half-close; shut the socket down under it
            sock = self.writer.get_extra_info("socket")
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)

    async def wait_closed_by_peer(self, timeout: float = WAIT) -> str:
        """'eof' or 'reset' once the listener drops us; 'open' after ``timeout``."""

        async def drain() -> str:
            while True:
                try:
                    data = await self.reader.read(1 << 16)
                except (ConnectionError, ssl.SSLError, OSError):
                    return "reset"
                if not data:
                    return "eof"

        try:
            return await asyncio.wait_for(drain(), timeout)
        except asyncio.TimeoutError:
            return "open"

    def abort(self) -> None:
        """Close with SO_LINGER 0: the peer sees a reset."""
        sock = self.writer.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def close(self) -> None:
        self.writer.transport.abort() if self.writer.transport.is_closing() else self.writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.writer.wait_closed(), 5)


def open_idle_sockets(address: str, n: int) -> list[socket.socket]:
    """``n`` plain TCP connections that never send a byte (half-open handshakes)."""
    host, port = host_port(address)
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.create_connection((host, port), timeout=WAIT)
            s.setblocking(False)
            socks.append(s)
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


def socket_state(sock: socket.socket) -> str:
    """'open', 'eof' or 'reset' for a non-blocking socket, without waiting."""
    for _ in range(1000):  # drain what the listener sent (its handshake)
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return "open"
        except (ConnectionResetError, OSError):
            return "reset"
        if not data:
            return "eof"
    return "open"

"""Conformance checks of ``close()`` against a peer whose event loop is blocked.

The peer is a plain (or TLS) socket served by a thread: it completes
distributed's handshake, then stops reading (its "event loop" is blocked: it
neither reads nor answers a TLS close_notify) until the check releases it, and
then reads everything up to the end of the stream. The stock comm's ``close()``
returns once its bytes are in the kernel; it never waits for the peer.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from typing import Any

import dask
import numpy as np
from distributed.comm import connect
from distributed.protocol import loads, to_serialize

from tests.certs import Certs
from tests.helpers_net import encode_msg, handshake_msg, parse_frames
from tests.variants import Variant

#: Upper bound for any single wait in these checks (a hang fails, never blocks CI).
WAIT = 30
#: The connect timeout the checks run with; a close() that waits for a blocked
#: peer's close_notify for that long fails the CLOSE_BOUND below.
CONNECT_TIMEOUT = "25s"
CLOSE_BOUND = 10


class BlockedPeer:
    """A listening socket whose one connection is served by a thread."""

    def __init__(self, variant: Variant, certs: Certs) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(WAIT)
        self.ctx: ssl.SSLContext | None = None
        if variant.tls:
            self.ctx = certs.security().get_listen_args("scheduler")["ssl_context"]
        self.address = f"{variant.scheme}://127.0.0.1:{self.sock.getsockname()[1]}"
        self.handshaken = threading.Event()
        self.release = threading.Event()
        self.messages: list[Any] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn: Any = None
        try:
            conn, _ = self.sock.accept()
            conn.settimeout(WAIT)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)
            if self.ctx is not None:
                conn = self.ctx.wrap_socket(conn, server_side=True)
            conn.sendall(encode_msg(handshake_msg()))
            buf = bytearray()
            while (frames := parse_frames(buf)) is None:
                buf += self._recv(conn)
            self.handshaken.set()
            if not self.release.wait(WAIT * 2):  # blocked: reads nothing meanwhile
                raise TimeoutError("never released")
            while True:
                data = self._recv(conn)
                if not data:
                    break
                buf += data
                while (frames := parse_frames(buf)) is not None:
                    self.messages.append(loads(frames))
        except BaseException as exc:  # reported by result()
            self.error = exc
        finally:
            if conn is not None:
                conn.close()
            self.sock.close()

    @staticmethod
    def _recv(conn: Any) -> bytes:
        try:
            return conn.recv(1 << 16)
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError):
            return b""  # the end of the stream, with or without close_notify

    async def result(self) -> list[Any]:
        await asyncio.get_running_loop().run_in_executor(None, self.thread.join, WAIT)
        assert not self.thread.is_alive(), "the peer never saw the end of the stream"
        if self.error is not None:
            raise self.error
        return self.messages


def _message(i: int, size: int) -> dict[str, Any]:
    return {"i": i, "data": to_serialize(np.full(size, i % 251, dtype="u1"))}


def _intact(messages: list[Any], n: int, size: int) -> None:
    assert [m["i"] for m in messages] == list(range(n))
    for m in messages:
        data = m["data"]
        assert data.nbytes == size and int(data.min()) == int(data.max()) == m["i"] % 251


async def check_close_does_not_wait_for_a_blocked_peer(
    variant: Variant, certs: Certs
) -> None:
    """``close()`` returns once what was written is in the kernel,
    without waiting for a peer whose event loop is blocked (over TLS: without
    waiting for its close_notify), and the peer then receives every byte."""
    with dask.config.set({"distributed.comm.timeouts.connect": CONNECT_TIMEOUT}):
        peer = BlockedPeer(variant, certs)
        comm = await connect(peer.address, **variant.connect_args(certs))
        await asyncio.get_running_loop().run_in_executor(None, peer.handshaken.wait, WAIT)
        for i in range(8):
            await comm.write(_message(i, 64 * 1024))
        try:
            await asyncio.wait_for(comm.close(), CLOSE_BOUND)
        finally:
            peer.release.set()
        _intact(await peer.result(), 8, 64 * 1024)
    assert comm.closed()


async def check_close_flushes_more_than_the_kernel_holds(
    variant: Variant, certs: Certs
) -> None:
    """With more written than the kernel's buffers hold, ``close()``
    waits for the blocked peer to take it (as the stock comm's flush does) and
    cuts nothing off, however long the peer stays blocked."""
    n, size = 24, 2 << 20
    # What is checked is an absence: close() still waiting after the connect
    # timeout (the bound that TLS handshakes and connects get) has passed twice
    # over. No event marks "a bound did not fire", so the check waits that long,
    # with the timeout set short to keep the wait short.
    with dask.config.set({"distributed.comm.timeouts.connect": "0.5s"}):
        peer = BlockedPeer(variant, certs)
        comm = await connect(peer.address, **variant.connect_args(certs), timeout=WAIT)
        await asyncio.get_running_loop().run_in_executor(None, peer.handshaken.wait, WAIT)
        writes = asyncio.ensure_future(_write_all(comm, n, size))
        closing = asyncio.ensure_future(_close_after(writes, comm))
        await asyncio.sleep(1.0)  # twice the connect timeout: no bound may cut it
        assert not closing.done(), "close() returned before the peer took the data"
        peer.release.set()
        await asyncio.wait_for(closing, WAIT)
        _intact(await peer.result(), n, size)


async def _write_all(comm: Any, n: int, size: int) -> None:
    for i in range(n):
        await comm.write(_message(i, size))


async def _close_after(writes: asyncio.Future[None], comm: Any) -> None:
    await writes
    await comm.close()

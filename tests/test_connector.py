"""asynciocomm.connector: what a failed connection attempt raises, beside the
stock connector on the same failure (real sockets, both loops)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import pytest
from distributed.comm import connect
from distributed.comm.core import FatalCommClosedError

from tests.certs import Certs


@contextlib.asynccontextmanager
async def _not_tls() -> AsyncIterator[int]:
    """A port whose server answers a TLS client hello with plain text."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.0 400 Bad Request\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once it is closed


@pytest.mark.parametrize("scheme", ["tls", "asyncio+tls"])
async def test_a_peer_that_does_not_speak_tls_fails_at_once_and_for_good(
        scheme: str, certs: Certs) -> None:
    """Fatal, so distributed does not retry until its connect timeout. Stock's
    error says nothing; ours names the TLS failure."""
    async with _not_tls() as port:
        args = certs.security().get_connection_args("client")
        with pytest.raises(FatalCommClosedError) as info:
            await connect(f"{scheme}://127.0.0.1:{port}", timeout=30, **args)
    if scheme == "asyncio+tls":
        assert "TLS handshake with asyncio+tls://127.0.0.1" in str(info.value)


@pytest.mark.parametrize("scheme", ["tcp", "asyncio"])
async def test_a_refused_connection_is_retried_until_the_timeout(scheme: str) -> None:
    port = _closed_port()
    with pytest.raises(OSError, match="Timed out trying to connect") as info:
        await connect(f"{scheme}://127.0.0.1:{port}", timeout=0.5)
    assert not isinstance(info.value, FatalCommClosedError)

"""Connection basics of the reliability scenarios (``tests/reliability`` and
``python -m tests.reliability``): the bound on every wait, the TLS spec and the
connect/listen arguments it gives, an in-process listener, the echo handler and
the well-behaved clients (a round trip, connect/close cycles).

Everything runs on real loopback sockets against real listeners; every wait has a
bound (a hang is reported as a failure, never blocks). Works for any scheme that
``distributed.comm`` knows: ``asyncio``, ``asyncio+tls``, stock ``tcp``/``tls``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

#: Upper bound of any single wait.
WAIT = 30.0


def is_tls(scheme: str) -> bool:
    """True for schemes that need TLS arguments (``tls``, ``wss``, ``*+tls``), as
    the bench's ``common.options.is_tls`` answers."""
    return scheme in ("tls", "wss") or scheme.endswith("+tls")


# -- TLS and connection arguments ------------------------------------------------------


@dataclass(frozen=True)
class TLSSpec:
    ca: str
    cert: str
    key: str | None = None

    def security(self) -> Any:
        from distributed.security import Security

        kw: dict[str, Any] = {}
        for role in ("scheduler", "worker", "client"):
            kw[f"tls_{role}_cert"] = self.cert
            if self.key:
                kw[f"tls_{role}_key"] = self.key
        return Security(tls_ca_file=self.ca, require_encryption=True, **kw)


def client_ssl_context(security: Any) -> ssl.SSLContext:
    """The client SSLContext distributed would use with ``security``."""
    return security.get_connection_args("client")["ssl_context"]


def connect_args(security: Any) -> dict[str, Any]:
    return security.get_connection_args("client") if security is not None else {}


@contextlib.asynccontextmanager
async def serve(scheme: str, handler: Any, security: Any = None,
                host: str = "127.0.0.1") -> AsyncIterator[Any]:
    """An in-process listener, stopped on exit."""
    from distributed.comm import listen

    kw = security.get_listen_args("scheduler") if security is not None else {}
    listener = listen(f"{scheme}://{host}:0", handler, **kw)
    await listener.start()
    try:
        yield listener
    finally:
        listener.stop()


# -- well-behaved clients --------------------------------------------------------------


async def roundtrip(address: str, connect_args: dict[str, Any], n: int = 3) -> None:
    """Connect, exchange ``n`` messages with an echo server, close."""
    from distributed.comm import connect

    comm = await asyncio.wait_for(connect(address, timeout=WAIT, **connect_args), WAIT)
    try:
        for i in range(n):
            msg = {"op": "ping", "i": i, "payload": b"x" * 1000}
            await asyncio.wait_for(comm.write(msg), WAIT)
            got = await asyncio.wait_for(comm.read(), WAIT)
            assert got == msg, got
    finally:
        await asyncio.wait_for(comm.close(), WAIT)


async def echo(comm: Any) -> None:
    """Echo every message until the peer goes away."""
    try:
        while True:
            await comm.write(await comm.read())
    except OSError:
        pass
    finally:
        comm.abort()


async def connect_close_cycles(
    address: str, connect_args: dict[str, Any], n: int, concurrency: int = 8,
    deadline: float = 600.0,
) -> int:
    """Open and close ``n`` comms (``concurrency`` at a time); returns how many
    round-tripped a message. Each cycle: connect, handshake, one ping, close."""
    from distributed.comm import connect

    done = 0
    stop_at = time.monotonic() + deadline

    async def worker(k: int) -> None:
        nonlocal done
        for i in range(k, n, concurrency):
            if time.monotonic() > stop_at:
                raise TimeoutError(f"{done} of {n} cycles in {deadline} s")
            comm = await asyncio.wait_for(connect(address, timeout=WAIT, **connect_args), WAIT)
            try:
                await asyncio.wait_for(comm.write({"op": "ping", "i": i}), WAIT)
                got = await asyncio.wait_for(comm.read(), WAIT)
                assert got == {"op": "ping", "i": i}, got
                done += 1
            finally:
                await asyncio.wait_for(comm.close(), WAIT)

    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    return done

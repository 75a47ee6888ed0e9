"""The listener: accepts connections and hands each new comm to distributed."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import dask
from distributed.comm.addressing import parse_host_port, unparse_host_port
from distributed.comm.core import BaseListener, CommClosedError
from distributed.comm.utils import ensure_concrete_host

from asynciocomm import lifetime
from asynciocomm.comm import AsyncioComm
from asynciocomm.config import Settings, load_settings
from asynciocomm.log import get_logger
from asynciocomm.protocol import FramedProtocol
from asynciocomm.sockets.accepting import Acceptor
from asynciocomm.sockets.binding import bind_sockets
from asynciocomm.sockets.tlsargs import check_encryption, expect_tls_context, tls_timeouts

logger = get_logger(__name__)

#: How a peer whose address the loop cannot tell is named. uvloop asks the kernel
#: for it only when asked, and a peer that reset at once has none by then.
UNKNOWN_PEER = "<unknown>"
#: The stock listener's line for a peer gone before distributed's handshake.
CLOSED_IN_HANDSHAKE = "Connection from %s closed before handshake completed"


def transport_address(transport: asyncio.BaseTransport, name: str) -> str:
    """``host:port`` of the transport's ``sockname`` or ``peername``."""
    addr = transport.get_extra_info(name)
    return UNKNOWN_PEER if not addr else unparse_host_port(*addr[:2])


@dataclasses.dataclass
class _Tasks:
    """The listener's connection tasks, kept referenced until they end."""

    running: set[asyncio.Task[None]] = dataclasses.field(default_factory=set)

    def start(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        self.running.add(task)
        task.add_done_callback(lambda t: self._done(t, name))

    def _done(self, task: asyncio.Task[None], name: str) -> None:
        self.running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "Listener %s: error handling a connection", name, exc_info=task.exception()
            )


class AsyncioListener(BaseListener):
    """Listens on one address (both IP families for a wildcard) and calls
    ``comm_handler`` with each comm once distributed's handshake is done.

    Over TLS it accepts by hand (:class:`asynciocomm.sockets.accepting.Acceptor`) and
    runs each handshake itself, so that a failed one is logged as the stock
    listener logs it.
    """

    def __init__(
        self,
        prefix: str,
        encrypted: bool,
        address: str,
        comm_handler: Callable[[AsyncioComm], Awaitable[None] | None],
        deserialize: bool = True,
        allow_offload: bool = True,
        default_host: str | None = None,
        default_port: int = 0,
        **connection_args: Any,
    ) -> None:
        super().__init__()
        self.prefix = prefix
        self.encrypted = encrypted
        check_encryption(prefix, encrypted, address, connection_args)
        self.ip, self.port = parse_host_port(address, default_port)
        self.default_host = default_host
        self.comm_handler = comm_handler
        self.deserialize = deserialize
        self.allow_offload = allow_offload
        self._ssl = expect_tls_context(connection_args) if encrypted else None
        self._settings: Settings = load_settings()
        self._servers: list[asyncio.AbstractServer] | None = None
        self._acceptor: Acceptor | None = None
        self._started = False
        self._tasks = _Tasks()
        # Held while listening (see asynciocomm.lifetime).
        self._loop_guard: AsyncGenerator[None, None] | None = None
        self.bound_address: tuple[str, int] | None = None
        #: For log lines, which outlive stop() (after it the address raises).
        self._name = prefix + unparse_host_port(self.ip, self.port)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        backlog = int(dask.config.get("distributed.comm.socket-backlog"))
        sockets = bind_sockets(self.ip, self.port, backlog)
        # Prefer IPv4 when listening on both families, as the stock listener does.
        by_family = sorted(sockets, key=lambda s: s.family != socket.AF_INET)
        self.bound_address = by_family[0].getsockname()[:2]
        self._name = self.prefix + unparse_host_port(*self.bound_address)
        if self._ssl is not None:
            self._acceptor = Acceptor(sockets, backlog, self._on_tls_accept, logger, self._name)
            self._acceptor.start()
            self._started = True
            self._loop_guard = lifetime.track(self)
            return
        servers: list[asyncio.AbstractServer] = []
        try:
            for sock in sockets:
                servers.append(
                    await loop.create_server(self._make_protocol, sock=sock, backlog=backlog)
                )
        except BaseException:
            for server in servers:
                server.close()
            for sock in sockets:
                sock.close()
            raise
        self._servers = servers
        self._started = True
        self._loop_guard = lifetime.track(self)

    def stop(self) -> None:
        """Stop accepting connections. Comms already accepted, those still in
        distributed's handshake included, are left alone, as the ``Listener``
        contract says: ``distributed.core.Server.stop()`` aborts the handshaking
        ones itself (``abort_handshaking_comms``)."""
        self._started = False
        servers, self._servers = self._servers, None
        for server in servers or ():
            server.close()
        acceptor, self._acceptor = self._acceptor, None
        if acceptor is not None:
            acceptor.close()
        self._loop_guard = None

    def close_at_loop_shutdown(self) -> None:
        """Stop: the event loop is shutting down (asynciocomm.lifetime)."""
        self.stop()

    # -- accepting -----------------------------------------------------------------

    def _make_protocol(self) -> FramedProtocol:
        return FramedProtocol(self._settings, on_connect=self._on_connect)

    def _on_tls_accept(self, conn: socket.socket, address: Any) -> None:
        self._tasks.start(self._tls_handshake(conn, address), self._name)

    async def _tls_handshake(self, conn: socket.socket, address: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            # The protocol's connection_made, once the handshake is done, hands
            # the connection on (_on_connect). On failure the loop closes conn.
            await loop.connect_accepted_socket(
                self._make_protocol,
                conn,
                ssl=self._ssl,
                **tls_timeouts(loop, self._settings),
            )
        except (OSError, asyncio.TimeoutError) as e:
            # The stock listener's line (distributed.comm.tcp.TLSListener).
            logger.warning(
                "Listener on %r: TLS handshake failed with remote %r: %s",
                self._name,
                self.prefix + unparse_host_port(*address[:2]),
                str(e) or type(e).__name__,
            )

    def _on_connect(self, protocol: FramedProtocol) -> None:
        transport = protocol.transport
        assert transport is not None
        if not self._started:
            # Accepted after stop(), before this ran: nothing will hand it to a
            # handler or abort it, so the client would hang in its handshake
            # (which has no timeout). Close it, as the stock listener does.
            protocol.abort()
            return
        if not transport.get_extra_info("peername"):
            # Reset before we saw it (uvloop asks the kernel for the address only
            # now): the handshake cannot run. The stock listener's line for it.
            logger.info(CLOSED_IN_HANDSHAKE, self.prefix + UNKNOWN_PEER)
            protocol.abort()
            return
        local = self.prefix + transport_address(transport, "sockname")
        peer = self.prefix + transport_address(transport, "peername")
        comm = AsyncioComm(protocol, local, peer, self.deserialize)
        comm.allow_offload = self.allow_offload
        self._tasks.start(self._handle(comm), self._name)

    async def _handle(self, comm: AsyncioComm) -> None:
        try:
            await self.on_connection(comm)
        except CommClosedError:
            logger.info(CLOSED_IN_HANDSHAKE, comm.peer_address)
            return
        except BaseException:
            comm.abort()
            raise
        result = self.comm_handler(comm)
        if inspect.isawaitable(result):
            await result

    # -- addresses -----------------------------------------------------------------

    def get_host_port(self) -> tuple[str, int]:
        """The listening address as a (host, port) tuple. Raises ValueError when
        the listener is not started, or stopped, as the stock listener does."""
        if not self._started or self.bound_address is None:
            raise ValueError("invalid operation on non-started AsyncioListener")
        return self.bound_address

    @property
    def listen_address(self) -> str:
        return self.prefix + unparse_host_port(*self.get_host_port())

    @property
    def contact_address(self) -> str:
        host, port = self.get_host_port()
        host = ensure_concrete_host(host, default_host=self.default_host)
        return self.prefix + unparse_host_port(host, port)

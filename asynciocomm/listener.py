"""The listener: accepts connections and hands each new comm to distributed."""

from __future__ import annotations

import asyncio
import errno
import inspect
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import dask
from distributed.comm.addressing import parse_host_port, unparse_host_port
from distributed.comm.core import BaseListener, CommClosedError
from distributed.comm.utils import ensure_concrete_host

from asynciocomm.comm import AsyncioComm
from asynciocomm.config import Settings, load_settings
from asynciocomm.protocol import FramedProtocol
from asynciocomm.tlsargs import check_encryption, expect_tls_context, tls_timeouts

logger = logging.getLogger(__name__)

#: Attempts at binding every family of a wildcard address to one random port.
BIND_ATTEMPTS = 5


def bind_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for ``host`` (all interfaces when empty), one per family.

    With port 0, the first socket picks the port and the others bind the same one
    (bpo-45693: asyncio would give every family its own random port).
    """
    for attempt in range(BIND_ATTEMPTS):
        try:
            return _bind_once(host or None, port, backlog)
        except OSError as e:
            if port != 0 or e.errno != errno.EADDRINUSE or attempt == BIND_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _bind_once(host: str | None, port: int, backlog: int) -> list[socket.socket]:
    infos = socket.getaddrinfo(
        host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
    )
    sockets: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    chosen_port = port
    try:
        for family, type_, proto, _, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            if chosen_port:
                addr = (addr[0], chosen_port, *addr[2:])
            sock = socket.socket(family, type_, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(addr)
            except OSError as e:
                sock.close()
                if sockets and e.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                    continue  # e.g. no IPv6 on this host: serve the other family
                raise
            sock.listen(backlog)
            sock.setblocking(False)
            sockets.append(sock)
            chosen_port = sock.getsockname()[1]
    except BaseException:
        for s in sockets:
            s.close()
        raise
    return sockets


class AsyncioListener(BaseListener):
    """Listens on one address (both IP families for a wildcard) and calls
    ``comm_handler`` with each comm once distributed's handshake is done."""

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
        self._tasks: set[asyncio.Task[None]] = set()
        self.bound_address: tuple[str, int] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        backlog = int(dask.config.get("distributed.comm.socket-backlog"))
        sockets = bind_sockets(self.ip, self.port, backlog)
        extra = tls_timeouts(loop, self._settings.connect_timeout) if self._ssl else {}
        servers: list[asyncio.AbstractServer] = []
        try:
            for sock in sockets:
                servers.append(
                    await loop.create_server(
                        self._make_protocol, sock=sock, backlog=backlog, ssl=self._ssl, **extra
                    )
                )
        except BaseException:
            for server in servers:
                server.close()
            for sock in sockets:
                sock.close()
            raise
        self._servers = servers
        # Prefer IPv4 when listening on both families, as the stock listener does.
        by_family = sorted(sockets, key=lambda s: s.family != socket.AF_INET)
        self.bound_address = by_family[0].getsockname()[:2]

    def stop(self) -> None:
        servers, self._servers = self._servers, None
        for server in servers or ():
            server.close()
        self.abort_handshaking_comms()

    def _make_protocol(self) -> FramedProtocol:
        return FramedProtocol(self._settings, on_connect=self._on_connect)

    def _on_connect(self, protocol: FramedProtocol) -> None:
        if self._servers is None:
            # Accepted after stop(): abort_handshaking_comms() has run already.
            protocol.abort()
            return
        transport = protocol.transport
        assert transport is not None
        local = self.prefix + unparse_host_port(*transport.get_extra_info("sockname")[:2])
        peer = self.prefix + unparse_host_port(*transport.get_extra_info("peername")[:2])
        comm = AsyncioComm(protocol, local, peer, self.deserialize)
        comm.allow_offload = self.allow_offload
        task = asyncio.ensure_future(self._handle(comm))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    async def _handle(self, comm: AsyncioComm) -> None:
        try:
            await self.on_connection(comm)
        except CommClosedError:
            logger.info("Connection from %s closed before handshake completed", comm.peer_address)
            return
        except BaseException:
            comm.abort()
            raise
        result = self.comm_handler(comm)
        if inspect.isawaitable(result):
            await result

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "Listener %s: error handling a connection",
                self.prefix + unparse_host_port(self.ip, self.port),
                exc_info=task.exception(),
            )

    def get_host_port(self) -> tuple[str, int]:
        """The listening address as a (host, port) tuple."""
        if self.bound_address is None:
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

"""The connector: opens a connection and wraps it in a comm."""

from __future__ import annotations

import asyncio
from typing import Any

from distributed.comm.addressing import parse_host_port, unparse_host_port
from distributed.comm.core import Connector

from asynciocomm.comm import AsyncioComm
from asynciocomm.config import load_settings
from asynciocomm.errors import connect_failed
from asynciocomm.protocol import FramedProtocol
from asynciocomm.sockets.eyeballs import connect_first, numeric, resolve
from asynciocomm.sockets.tlsargs import check_encryption, expect_tls_context, tls_timeouts


class AsyncioConnector(Connector):
    """Connects to ``prefix + address`` (plain TCP, or TLS when ``encrypted``).

    A host name is resolved once and its addresses are raced as the stock
    connector races them (:mod:`asynciocomm.sockets.eyeballs`: IPv4 is tried 0.3 s after
    a silent IPv6 address), on both loops. TLS trust failures raise
    ``FatalCommClosedError`` at once, so distributed stops retrying instead of
    running into its connect timeout.
    """

    def __init__(self, prefix: str, encrypted: bool) -> None:
        self.prefix = prefix
        self.encrypted = encrypted

    async def connect(
        self, address: str, deserialize: bool = True, **connection_args: Any
    ) -> AsyncioComm:
        check_encryption(self.prefix, self.encrypted, address, connection_args)
        host, port = parse_host_port(address)
        settings = load_settings()
        loop = asyncio.get_running_loop()
        kwargs: dict[str, Any] = {}
        if self.encrypted:
            kwargs["ssl"] = expect_tls_context(connection_args)
            # SNI and hostname checks name the host asked for, not the address won.
            kwargs["server_hostname"] = connection_args.get("server_hostname") or host
            kwargs.update(tls_timeouts(loop, settings))
        try:
            if numeric(host, port) is not None:
                # One address, nothing to race: the loop connects by itself.
                transport, protocol = await loop.create_connection(
                    lambda: FramedProtocol(settings), host, port, **kwargs
                )
            else:
                sock = await connect_first(await resolve(host, port))
                transport, protocol = await loop.create_connection(
                    lambda: FramedProtocol(settings), sock=sock, **kwargs
                )
        except OSError as exc:  # ssl.SSLError included
            raise connect_failed(self.prefix + address, exc) from exc
        local = self.prefix + unparse_host_port(*transport.get_extra_info("sockname")[:2])
        return AsyncioComm(protocol, local, self.prefix + address, deserialize)

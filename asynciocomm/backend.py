"""Backends: what distributed's registry returns for our schemes.

``asyncio://`` and ``asyncio+tls://`` are registered through the
``distributed.comm.backends`` entry points. :func:`takeover_backend` builds the same
transport under the ``tcp://`` / ``tls://`` prefixes (see :mod:`asynciocomm.takeover`).
"""

from __future__ import annotations

from typing import Any

from distributed.comm.addressing import parse_host_port, unparse_host_port
from distributed.comm.registry import Backend
from distributed.utils import ensure_ip

from asynciocomm import framing
from asynciocomm.connector import AsyncioConnector
from asynciocomm.listener import AsyncioListener


class _IPBackend(Backend):
    """An IP transport; ``scheme`` and ``encrypted`` choose the variant."""

    scheme: str = "asyncio"
    encrypted: bool = False

    def __init__(self, scheme: str | None = None, encrypted: bool | None = None) -> None:
        if scheme is not None:
            self.scheme = scheme
        if encrypted is not None:
            self.encrypted = encrypted
        self.prefix = self.scheme + "://"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.prefix}>"

    def get_connector(self) -> AsyncioConnector:
        return AsyncioConnector(self.prefix, self.encrypted)

    def get_listener(
        self, loc: str, handle_comm: Any, deserialize: bool, **connection_args: Any
    ) -> AsyncioListener:
        return AsyncioListener(
            self.prefix, self.encrypted, loc, handle_comm, deserialize, **connection_args
        )

    def get_address_host(self, loc: str) -> str:
        return parse_host_port(loc)[0]

    def get_address_host_port(self, loc: str) -> tuple[str, int]:
        return parse_host_port(loc)

    def resolve_address(self, loc: str) -> str:
        host, port = parse_host_port(loc)
        return unparse_host_port(ensure_ip(host), port)

    def get_local_address_for(self, loc: str) -> str:
        # The stock tcp backend's answer: how it finds the local address of an
        # IPv6 peer differs between releases (2024.12 calls get_ipv6 for it).
        # Imported here: the takeover's entry point (patches/0001) imports this
        # module while distributed.comm itself is being imported.
        from distributed.comm.tcp import TCPBackend

        return TCPBackend().get_local_address_for(loc)


class AsyncioBackend(_IPBackend):
    """``asyncio://``: plain TCP."""

    scheme = "asyncio"
    encrypted = False


class AsyncioTLSBackend(_IPBackend):
    """``asyncio+tls://``: TLS, configured like distributed's ``tls://``."""

    scheme = "asyncio+tls"
    encrypted = True


class TakeoverBackend(_IPBackend):
    """This transport serving ``tcp://`` or ``tls://`` (wire-compatible with the
    stock comm: checked once per process, at its first comm, by
    :func:`asynciocomm.framing.checked`)."""

    def get_connector(self) -> AsyncioConnector:
        framing.checked()
        return super().get_connector()

    def get_listener(self, loc: str, handle_comm: Any, deserialize: bool,
                     **connection_args: Any) -> AsyncioListener:
        framing.checked()
        return super().get_listener(loc, handle_comm, deserialize, **connection_args)


def takeover_backend(encrypted: bool) -> Backend:
    """Factory for ``tcp://`` (or ``tls://`` when ``encrypted``) on this transport."""
    return TakeoverBackend("tls" if encrypted else "tcp", encrypted)

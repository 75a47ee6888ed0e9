"""Checks of connection arguments shared by listeners and connectors."""

from __future__ import annotations

import asyncio
import ssl
import sys
from typing import Any

from asynciocomm.config import Settings
from asynciocomm.loops import of_uvloop


def check_encryption(prefix: str, encrypted: bool, address: str, args: dict[str, Any]) -> None:
    """Refuse a plain scheme when the configuration requires encryption."""
    if not encrypted and args.get("require_encryption"):
        raise RuntimeError(
            "encryption required by Dask configuration, "
            f"refusing communication from/to {prefix + address!r}"
        )


def expect_tls_context(args: dict[str, Any]) -> ssl.SSLContext:
    """The ``ssl_context`` connection argument, which TLS schemes require."""
    ctx = args.get("ssl_context")
    if not isinstance(ctx, ssl.SSLContext):
        raise TypeError(
            "TLS expects a `ssl_context` argument of type "
            "ssl.SSLContext (perhaps check your TLS configuration?)"
            f" Instead got {ctx!r}"
        )
    return ctx


def tls_timeouts(loop: asyncio.AbstractEventLoop, settings: Settings) -> dict[str, float]:
    """Bounds on the TLS handshake and shutdown, passed to create_server/connection.

    The handshake gets the connect timeout (a peer that never completes it is
    dropped then). The shutdown gets ``timeouts.tcp``, the bound the kernel gives
    the stock comm's unsent bytes (TCP_USER_TIMEOUT): ``close()`` returns without
    waiting for it (see ``protocol.CLOSE_NOTIFY_WAIT``), and the transport keeps
    sending what it holds, then gives up on a peer silent for that long.
    """
    kwargs: dict[str, float] = {"ssl_handshake_timeout": settings.connect_timeout}
    if sys.version_info >= (3, 11) or of_uvloop(loop):
        kwargs["ssl_shutdown_timeout"] = float(settings.tcp_timeout)
    return kwargs

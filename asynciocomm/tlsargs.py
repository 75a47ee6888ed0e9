"""Checks of connection arguments shared by listeners and connectors."""

from __future__ import annotations

import asyncio
import ssl
import sys
from typing import Any


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


def tls_timeouts(loop: asyncio.AbstractEventLoop, connect_timeout: float) -> dict[str, float]:
    """Bounds on the TLS handshake and shutdown, passed to create_server/connection.

    The handshake gets the connect timeout (a peer that never completes it is
    dropped then). The shutdown (close_notify exchange) gets the same bound instead
    of asyncio's 30 s default, so a peer that vanishes cannot hold close() longer
    than a connect attempt.
    """
    kwargs = {"ssl_handshake_timeout": connect_timeout}
    if sys.version_info >= (3, 11) or type(loop).__module__.startswith("uvloop"):
        kwargs["ssl_shutdown_timeout"] = connect_timeout
    return kwargs

"""Transport variants under test, and helpers to serve and reach them.

A variant is a scheme plus how to reach it: ``asyncio``, ``asyncio+tls``, the
takeover of ``tcp://``/``tls://`` by asynciocomm, and the stock Tornado ``tcp`` /
``tls`` comms as the reference that the conformance checks must also pass.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from distributed.comm import connect, listen
from distributed.comm.core import Comm

import asynciocomm
from tests.certs import Certs
from bench.reliability.conn import echo  # noqa: F401  (shared echo handler)


@dataclass(frozen=True)
class Variant:
    name: str
    scheme: str
    tls: bool
    takeover: bool = False
    ours: bool = True

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Install the takeover for the duration, when this variant needs it."""
        if not self.takeover:
            yield
            return
        asynciocomm.install()
        try:
            yield
        finally:
            asynciocomm.uninstall()

    def listen_args(self, certs: Certs | None) -> dict[str, Any]:
        if not self.tls:
            return {}
        assert certs is not None
        return certs.security().get_listen_args("scheduler")

    def connect_args(self, certs: Certs | None) -> dict[str, Any]:
        if not self.tls:
            return {}
        assert certs is not None
        return certs.security().get_connection_args("client")


VARIANTS = [
    Variant("asyncio", "asyncio", tls=False),
    Variant("asyncio+tls", "asyncio+tls", tls=True),
    Variant("takeover-tcp", "tcp", tls=False, takeover=True),
    Variant("takeover-tls", "tls", tls=True, takeover=True),
    Variant("stock-tcp", "tcp", tls=False, ours=False),
    Variant("stock-tls", "tls", tls=True, ours=False),
]
OURS = [v for v in VARIANTS if v.ours]
#: asynciocomm's own schemes, without the takeover.
OWN = [v for v in OURS if not v.takeover]


def variant_params(variants: list[Variant] = VARIANTS) -> list[Any]:
    return [pytest.param(v, id=v.name) for v in variants]


def variant_fixture(variants: list[Variant]) -> Any:
    """A fixture parametrized over ``variants``, each active while a test runs."""

    @pytest.fixture(params=variant_params(variants))
    def fixture(request: pytest.FixtureRequest) -> Iterator[Variant]:
        variant = request.param
        with variant.active():
            yield variant

    return fixture


Handler = Callable[[Comm], Awaitable[None]]


@contextlib.asynccontextmanager
async def serve(
    variant: Variant,
    certs: Certs | None,
    handler: Handler = echo,
    host: str = "127.0.0.1",
    **kwargs: Any,
) -> AsyncIterator[Any]:
    """A started listener for ``variant``, stopped on exit."""
    listener = listen(
        f"{variant.scheme}://{host}:0", handler, **variant.listen_args(certs), **kwargs
    )
    await listener.start()
    try:
        yield listener
    finally:
        listener.stop()


async def connect_to(
    variant: Variant, certs: Certs | None, address: str, **kwargs: Any
) -> Comm:
    return await connect(address, **variant.connect_args(certs), **kwargs)


def raw_socket(comm: Comm) -> socket.socket | Any:
    """The OS socket under a comm of any variant (ours or stock)."""
    protocol = getattr(comm, "_protocol", None)
    if protocol is not None:
        return protocol.transport.get_extra_info("socket")
    return comm.stream.socket  # type: ignore[attr-defined]

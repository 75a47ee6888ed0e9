"""Transport variants under test, and helpers to serve and reach them.

A variant is a scheme plus how to reach it: ``asyncio``, ``asyncio+tls``, the
takeover of ``tcp://``/``tls://`` by asynciocomm, and the stock Tornado ``tcp`` /
``tls`` comms as the reference that the conformance checks must also pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import select
import socket
import struct
import termios
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from distributed.comm import connect, listen
from distributed.comm.core import Comm

import asynciocomm
from tests.certs import Certs
from tests.peers.conn import echo  # noqa: F401  (shared echo handler)


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


#: Upper bound of :func:`until_peer_closed`'s wait.
PEER_CLOSED_WAIT = 30.0


#: Loop iterations :func:`until_peer_closed` gives a transport that reads on
#: its own to take what the kernel holds (a stock comm reads only when asked).
DRAIN_TURNS = 50


def _socket_state(comm: Comm) -> tuple[bool, int] | None:
    """(the peer's FIN is in the kernel, bytes the kernel holds unread), or None
    once the transport has let go of its socket (it saw the end)."""
    try:
        fd = raw_socket(comm).fileno()
    except AttributeError:
        return None
    if fd < 0:  # closed on the peer's end (a TLS transport closes itself)
        return None
    poller = select.poll()
    poller.register(fd, select.POLLRDHUP)
    hung_up = any(ev & select.POLLRDHUP for _, ev in poller.poll(0))
    unread = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
    return hung_up, unread


async def until_peer_closed(comm: Comm) -> None:
    """Wait (bounded) until the peer's FIN has reached ``comm``'s socket; then let
    the loop turn until a transport that reads on its own has taken every byte,
    the end included. The comm has then the peer's close at hand (stock's, which
    reads only when asked, in the kernel), whatever the machine's load."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PEER_CLOSED_WAIT
    while (state := _socket_state(comm)) is not None and not state[0]:
        if loop.time() > deadline:
            raise AssertionError("the peer's close did not arrive")
        await asyncio.sleep(0.005)
    for _ in range(DRAIN_TURNS):
        state = _socket_state(comm)
        if state is None or not state[1]:
            break
        await asyncio.sleep(0)
    for _ in range(4):  # the end is read in the loop's next iterations
        await asyncio.sleep(0)

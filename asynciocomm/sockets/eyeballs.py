"""Name resolution and "happy eyeballs" (RFC 6555), as the stock comm does them.

The stock connector resolves with ``distributed.comm.tcp._getaddrinfo`` (numeric
addresses without a thread) and connects through tornado's ``TCPClient``: the
first address's family is tried at once, one attempt at a time; the other family
starts :data:`FALLBACK_DELAY` later, or as soon as an attempt of the first family
fails; the first connection made wins and every other attempt is closed.
uvloop's ``create_connection`` has no ``happy_eyeballs_delay``, so the race runs
here, on plain sockets, for both loops; the winner is then handed to
``create_connection(sock=...)``, which does the TLS handshake on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

#: Seconds before the other address family is tried: tornado's
#: ``_INITIAL_CONNECT_TIMEOUT``, which the stock comm's TCPClient uses.
FALLBACK_DELAY = 0.3

_NUMERIC_ONLY = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV

Address = tuple[int, Any]  # (family, sockaddr)


def numeric(host: str, port: int) -> list[Address] | None:
    """The addresses of a numeric ``host`` (no lookup, never blocks), or None for
    a name that needs resolving."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=_NUMERIC_ONLY)
    except socket.gaierror as e:
        if e.errno != socket.EAI_NONAME:
            raise
        return None
    return [(family, addr) for family, _, _, _, addr in infos]


async def resolve(host: str, port: int) -> list[Address]:
    """``host``'s addresses in the resolver's order: numeric hosts at once, names
    through the loop's ``getaddrinfo`` (a thread on asyncio, libuv's on uvloop)."""
    found = numeric(host, port)
    if found is not None:
        return found
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [(family, addr) for family, _, _, _, addr in infos]


def split(addrs: list[Address]) -> tuple[list[Address], list[Address]]:
    """The first address's family, and the others (tornado's ``_Connector.split``)."""
    first = addrs[0][0]
    return [a for a in addrs if a[0] == first], [a for a in addrs if a[0] != first]


async def _attempt(loop: asyncio.AbstractEventLoop, family: int, addr: Any) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await loop.sock_connect(sock, addr)
    except BaseException:
        sock.close()
        raise
    return sock


class _Race:
    """One connection race: a lane per family, each trying its addresses in turn."""

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self.loop = loop
        self.delay = delay
        self.errors: list[OSError] = []
        self.first_failed = asyncio.Event()

    async def lane(self, addrs: list[Address], wait: bool) -> socket.socket | None:
        if wait:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.first_failed.wait(), self.delay)
        for family, addr in addrs:
            try:
                return await _attempt(self.loop, family, addr)
            except OSError as exc:
                self.errors.append(exc)
                self.first_failed.set()
        return None


def _close_result(task: asyncio.Task[socket.socket | None]) -> None:
    if not task.cancelled() and task.exception() is None:
        sock = task.result()
        if sock is not None:
            sock.close()


async def connect_first(addrs: list[Address], delay: float = FALLBACK_DELAY) -> socket.socket:
    """A connected, non-blocking socket to the first of ``addrs`` that answers.

    Raises the last connection error when every address failed. Every attempt
    that does not win, cancelled ones included, is closed.
    """
    if not addrs:
        raise OSError("no address to connect to")
    loop = asyncio.get_running_loop()
    primary, secondary = split(addrs)
    race = _Race(loop, delay)
    pending = {asyncio.ensure_future(race.lane(primary, wait=False))}
    if secondary:
        pending.add(asyncio.ensure_future(race.lane(secondary, wait=True)))
    winner: socket.socket | None = None
    try:
        while pending and winner is None:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if winner is None and task.exception() is None:
                    winner = task.result()
                else:
                    _close_result(task)  # two connections in one turn: keep one
            for task in done:
                exc = task.exception()
                if exc is not None:
                    raise exc  # not a connection error: a bug, do not hide it
    except BaseException:
        if winner is not None:
            winner.close()
        raise
    finally:
        for task in pending:
            task.cancel()
            task.add_done_callback(_close_result)
    if winner is None:
        raise race.errors[-1] if race.errors else OSError("connection failed")
    return winner

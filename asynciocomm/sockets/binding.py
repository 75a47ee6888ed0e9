"""Listening sockets for an address, bound as the stock comm binds them.

The stock listener uses tornado's ``netutil.bind_sockets``; this module follows it
step by step: AF_INET is bound first, a family whose ``socket()`` fails with
EAFNOSUPPORT (a kernel booted with ``ipv6.disable=1``) is skipped, macOS's
link-local entry for ``localhost`` is skipped, and so is a ``::1`` that cannot be
bound for ``localhost`` (IPv6 partly disabled, as in Docker's default set-up).
One difference is kept from asynciocomm's earlier binding and matches tornado's
intent: with port 0 every family gets the port the first one was given
(bpo-45693: asyncio's own ``create_server`` gives each family its own).
"""

from __future__ import annotations

import errno
import socket
import sys
from collections.abc import Iterable
from typing import Any

from asynciocomm.sockets.sockopts import reuse_address

#: Attempts at binding every family of a wildcard address to one random port (the
#: stock listener's count: the port the first family got may be taken in another).
BIND_ATTEMPTS = 5

AddrInfo = tuple[int, int, int, str, Any]


def candidates(
    infos: Iterable[AddrInfo], host: str | None, platform: str = sys.platform
) -> list[AddrInfo]:
    """The ``getaddrinfo`` entries to bind, in tornado's order and with its skips:
    sorted by family (AF_INET first), duplicates dropped, and on macOS the
    link-local ``fe80::1%lo0`` entry of ``localhost`` left out (its firewall
    prompts for it)."""
    out: list[AddrInfo] = []
    for info in sorted(infos, key=lambda info: info[0]):
        if info in out:
            continue
        family, _, _, _, sockaddr = info
        if (
            platform == "darwin"
            and host == "localhost"
            and family == socket.AF_INET6
            and sockaddr[3] != 0
        ):
            continue
        out.append(info)
    return out


def bind_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening, non-blocking sockets for ``host`` (all interfaces when empty),
    one per usable family and address, all on one port."""
    for attempt in range(BIND_ATTEMPTS):
        try:
            return _bind_once(host or None, port, backlog)
        except OSError as e:
            if port != 0 or e.errno != errno.EADDRINUSE or attempt == BIND_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _bind_once(host: str | None, port: int, backlog: int) -> list[socket.socket]:
    # Python built without IPv6 still gets AF_INET6 entries from getaddrinfo
    # (bpo-16208), as tornado notes.
    family = socket.AF_UNSPEC if socket.has_ipv6 else socket.AF_INET
    infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    bound_port: int | None = None
    try:
        for af, socktype, proto, _, sockaddr in candidates(infos, host):
            try:
                sock = socket.socket(af, socktype, proto)
            except OSError as e:
                if e.errno == errno.EAFNOSUPPORT:
                    continue  # e.g. no IPv6 in this kernel: serve the other family
                raise
            try:
                _prepare(sock, af)
                if sockaddr[1] == 0 and bound_port is not None:
                    sockaddr = (sockaddr[0], bound_port, *sockaddr[2:])
                sock.bind(sockaddr)
            except OSError as e:
                sock.close()
                if e.errno == errno.EADDRNOTAVAIL and host == "localhost" and sockaddr[0] == "::1":
                    continue  # IPv6 partly disabled: ::1 resolves but cannot be bound
                raise
            sock.listen(backlog)
            sock.setblocking(False)
            sockets.append(sock)
            bound_port = sock.getsockname()[1]
    except BaseException:
        for s in sockets:
            s.close()
        raise
    if not sockets:
        raise OSError(errno.EAFNOSUPPORT, f"no address family of {host!r} can be used here")
    return sockets


def _prepare(sock: socket.socket, family: int) -> None:
    if reuse_address():
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        except OSError as e:
            if e.errno != errno.ENOPROTOOPT:  # Hurd has no SO_REUSEADDR (as tornado)
                raise
    if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
        # One socket per family, as tornado: an IPv6 socket would take IPv4 too on
        # Linux, and then 0.0.0.0 and :: could not both be bound.
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)

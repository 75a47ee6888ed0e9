"""Accepting on listening sockets by hand, for the TLS listener.

``loop.create_server(ssl=...)`` runs each TLS handshake itself and drops a failed
one without a word, where the stock listener logs it. So the TLS listener accepts
here, the way asyncio's own server does (a reader on each listening socket, up to
``backlog`` accepts per wake-up, a pause when the process runs out of
descriptors), and runs the handshake itself with ``loop.connect_accepted_socket``,
which raises on failure. ``loop.start_tls`` is no way round: uvloop starts reading
right after ``connection_made``, before the handshake could be started.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Callable
from typing import Any

#: Seconds before accepting again after running out of descriptors or memory
#: (asyncio's ``constants.ACCEPT_RETRY_DELAY``, which its own server uses).
ACCEPT_RETRY_DELAY = 1.0
#: accept() errors that mean "out of resources": retried after the delay above.
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

OnAccept = Callable[[socket.socket, Any], None]


class Acceptor:
    """Accepts connections on ``sockets`` and calls ``on_accept(conn, address)``
    with each (a connected, non-blocking socket) until :meth:`close`."""

    def __init__(
        self,
        sockets: list[socket.socket],
        backlog: int,
        on_accept: OnAccept,
        logger: logging.Logger,
        name: str,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._sockets = sockets
        self._backlog = backlog
        self._on_accept = on_accept
        self._logger = logger
        self._name = name
        self._retries: dict[socket.socket, asyncio.TimerHandle] = {}

    def start(self) -> None:
        for sock in self._sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        """Stop accepting and close the listening sockets, at once (as asyncio's
        server does: the port is free when this returns)."""
        for handle in self._retries.values():
            handle.cancel()
        self._retries = {}
        sockets, self._sockets = self._sockets, []
        for sock in sockets:
            if sock.fileno() != -1:
                with contextlib.suppress(RuntimeError):  # the loop is already closed
                    self._loop.remove_reader(sock.fileno())
            sock.close()

    def _accept(self, sock: socket.socket) -> None:
        for _ in range(self._backlog):
            try:
                conn, address = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue  # that peer is gone already
            except OSError as e:
                if e.errno not in RESOURCE_ERRNOS:
                    raise
                self._logger.error(
                    "Listener on %r: cannot accept (%s), retrying in %s s",
                    self._name,
                    e,
                    ACCEPT_RETRY_DELAY,
                )
                self._loop.remove_reader(sock.fileno())
                self._retries[sock] = self._loop.call_later(
                    ACCEPT_RETRY_DELAY, self._resume, sock
                )
                return
            conn.setblocking(False)
            self._on_accept(conn, address)

    def _resume(self, sock: socket.socket) -> None:
        self._retries.pop(sock, None)
        if sock in self._sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

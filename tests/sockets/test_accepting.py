"""The TLS listener's accept loop (asynciocomm.sockets.accepting), on real
listening sockets of each event loop."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket

from asynciocomm.sockets import accepting
from asynciocomm.sockets.accepting import Acceptor


def _listening(cls: type[socket.socket] = socket.socket) -> socket.socket:
    sock = cls(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.setblocking(False)
    return sock


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def test_every_connection_is_handed_over_non_blocking() -> None:
    sock = _listening()
    port = sock.getsockname()[1]
    got: asyncio.Queue[socket.socket] = asyncio.Queue()
    acceptor = Acceptor([sock], 2, lambda conn, addr: got.put_nowait(conn),
                        logging.getLogger("test"), "test")
    acceptor.start()
    clients = [await _connect(port) for _ in range(5)]  # more than one wake-up's backlog
    try:
        conns = [await asyncio.wait_for(got.get(), 5) for _ in range(5)]
        assert all(not c.getblocking() for c in conns)
        for c in conns:
            c.close()
    finally:
        acceptor.close()
        for _, w in clients:
            w.close()


async def test_close_frees_the_port_at_once() -> None:
    sock = _listening()
    port = sock.getsockname()[1]
    acceptor = Acceptor([sock], 8, lambda conn, addr: conn.close(),
                        logging.getLogger("test"), "test")
    acceptor.start()
    acceptor.close()
    assert sock.fileno() == -1
    again = socket.socket()
    try:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))  # nothing of ours holds it
    finally:
        again.close()


class _OutOfDescriptorsOnce(socket.socket):
    """A real listening socket whose first accept() fails as a process out of
    descriptors does."""

    failed = False

    def accept(self):  # type: ignore[no-untyped-def]
        if not _OutOfDescriptorsOnce.failed:
            _OutOfDescriptorsOnce.failed = True
            raise OSError(errno.EMFILE, "Too many open files")
        return super().accept()


async def test_running_out_of_descriptors_pauses_logs_and_resumes(monkeypatch, caplog) -> None:
    monkeypatch.setattr(accepting, "ACCEPT_RETRY_DELAY", 0.05)
    _OutOfDescriptorsOnce.failed = False
    sock = _listening(_OutOfDescriptorsOnce)
    got: asyncio.Queue[socket.socket] = asyncio.Queue()
    acceptor = Acceptor([sock], 8, lambda conn, addr: got.put_nowait(conn),
                        logging.getLogger("test.accepting"), "the-name")
    acceptor.start()
    with caplog.at_level(logging.ERROR, "test.accepting"):
        _, writer = await _connect(sock.getsockname()[1])
        try:
            conn = await asyncio.wait_for(got.get(), 5)  # accepted after the retry
            conn.close()
        finally:
            acceptor.close()
            writer.close()
    assert _OutOfDescriptorsOnce.failed
    (record,) = [r for r in caplog.records if r.name == "test.accepting"]
    assert "Listener on 'the-name': cannot accept" in record.getMessage()

"""Conformance checks of listening: what stop() leaves, the addresses after it,
binding without IPv6, rebinding a port, and what the listener logs (where
distributed's logging config hears it)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import gc
import logging
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from distributed.comm import connect, listen
from distributed.comm.addressing import parse_address
from distributed.comm.core import CommClosedError
from distributed.comm.registry import get_backend
from distributed.core import Server, rpc

from tests.certs import Certs
from tests.helpers_net import RawPeer, roundtrip
from tests.peers.conn import echo
from tests.variants import Variant, connect_to, serve

#: Upper bound for any single wait in these checks (a hang fails, never blocks CI).
WAIT = 30


# -- helpers -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Line:
    """What a log record said (kept without its traceback, which would keep the
    failed connection's socket alive)."""

    name: str
    levelname: str
    msg: str
    args: Any
    traceback: bool

    def template(self) -> tuple[str, str, bool]:
        return self.levelname, self.msg, self.traceback


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[Line] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        self.lines.append(
            Line(record.name, record.levelname, str(record.msg), tuple(map(str, args)),
                 record.exc_info is not None)
        )


@contextlib.contextmanager
def distributed_log() -> Iterator[list[Line]]:
    """Records of INFO and above that reach the ``distributed`` logger, where
    distributed's logging config puts its handler (at INFO, its default level),
    and those of ``asyncio`` (errors in event-loop callbacks)."""
    handler = _Lines()
    loggers = [logging.getLogger("distributed"), logging.getLogger("asyncio")]
    levels = [lg.level for lg in loggers]
    loggers[0].setLevel(logging.INFO)
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield handler.lines
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)


async def _until(predicate: Any, what: str) -> None:
    for _ in range(WAIT * 50):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _fds_back_to(before: int) -> None:
    async def settle() -> bool:
        gc.collect()
        return _open_fds() <= before

    for _ in range(WAIT * 10):
        if await settle():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"leaked descriptors: {_open_fds()} open, {before} before")


async def _in_handshake(variant: Variant, certs: Certs, address: str) -> Any:
    """A comm connected below distributed's connect(): it has read the
    listener's half of the handshake and not sent its own."""
    _, loc = parse_address(address)
    connector = get_backend(variant.scheme).get_connector()
    comm = await asyncio.wait_for(connector.connect(loc, **variant.connect_args(certs)), WAIT)
    theirs = await asyncio.wait_for(comm.read(), WAIT)
    assert "pickle-protocol" in theirs
    return comm


# -- stop() leaves established comms ------------------------------------------


async def check_stop_leaves_established_comms_open(variant: Variant, certs: Certs) -> None:
    """``listen()`` as a context manager: the server's comm outlives the block,
    and so does one whose handshake was in flight when stop() ran."""
    handed: asyncio.Queue[Any] = asyncio.Queue()

    async def handler(comm: Any) -> None:
        handed.put_nowait(comm)

    address = f"{variant.scheme}://127.0.0.1:0"
    async with listen(address, handler, **variant.listen_args(certs)) as listener:
        comm = await connect(listener.contact_address, timeout=WAIT, **variant.connect_args(certs))
        half = await _in_handshake(variant, certs, listener.contact_address)
    await half.write(half.handshake_info())  # finish it after stop()
    pairs = [(comm, await asyncio.wait_for(handed.get(), WAIT))]
    pairs.append((half, await asyncio.wait_for(handed.get(), WAIT)))
    try:
        for i, (client, server) in enumerate(pairs):
            assert "closed" not in repr(server) and not server.closed(), repr(server)
            await client.write({"op": "ping", "i": i})
            assert await asyncio.wait_for(server.read(), WAIT) == {"op": "ping", "i": i}
            await server.write({"op": "pong", "i": i})
            assert await asyncio.wait_for(client.read(), WAIT) == {"op": "pong", "i": i}
    finally:
        for client, server in pairs:
            await client.close()
            await server.close()


async def check_server_stop_aborts_handshaking_comms(variant: Variant, certs: Certs) -> None:
    """``distributed.core.Server.stop()`` is what aborts comms still in their
    handshake (``abort_handshaking_comms``), with an rpc served before."""
    server = Server({"ping": lambda: "pong"})
    await server.listen(f"{variant.scheme}://127.0.0.1:0", **variant.listen_args(certs))
    try:
        async with rpc(server.address, connection_args=variant.connect_args(certs)) as r:
            assert await asyncio.wait_for(r.ping(), WAIT) == "pong"
        half = await _in_handshake(variant, certs, server.address)
        server.stop()
        with pytest.raises(CommClosedError):
            await asyncio.wait_for(half.read(), WAIT)
        half.abort()
    finally:
        server.stop()


# -- addresses after stop() --------------------------------------------------


async def check_addresses_raise_after_stop(variant: Variant, certs: Certs) -> None:
    listener = listen(f"{variant.scheme}://127.0.0.1:0", echo, **variant.listen_args(certs))
    with pytest.raises(ValueError):
        listener.get_host_port()
    await listener.start()
    assert listener.get_host_port()[1] > 0
    listener.stop()
    for read in (
        listener.get_host_port,
        lambda: listener.listen_address,
        lambda: listener.contact_address,
    ):
        with pytest.raises(ValueError):
            read()


# -- no IPv6 in the kernel ----------------------------------------------------


class _NoIPv6Socket(socket.socket):
    """``socket.socket`` as on a kernel booted with ``ipv6.disable=1``."""

    def __init__(self, family: Any = -1, type: Any = -1, proto: Any = -1, fileno: Any = None):
        if fileno is None and family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, os.strerror(errno.EAFNOSUPPORT))
        super().__init__(family, type, proto, fileno)


@contextlib.contextmanager
def no_ipv6() -> Iterator[None]:
    real = socket.socket
    socket.socket = _NoIPv6Socket  # type: ignore[misc]
    try:
        yield
    finally:
        socket.socket = real  # type: ignore[misc]


#: ``python -c`` prelude for a subprocess that has no IPv6 (see ``no_ipv6``).
NO_IPV6_PRELUDE = """
import errno, os, socket
class _NoIPv6Socket(socket.socket):
    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
        if fileno is None and family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, os.strerror(errno.EAFNOSUPPORT))
        super().__init__(family, type, proto, fileno)
socket.socket = _NoIPv6Socket
"""


async def check_listen_on_all_interfaces_without_ipv6(variant: Variant, certs: Certs) -> None:
    with no_ipv6():
        async with serve(variant, certs, host="") as listener:
            port = listener.get_host_port()[1]
            assert listener.listen_address == f"{variant.scheme}://0.0.0.0:{port}"
            await roundtrip(variant, certs, f"{variant.scheme}://127.0.0.1:{port}")


# -- SO_REUSEADDR on POSIX ----------------------------------------------------


async def check_port_rebinds_while_closed_connections_linger(
    variant: Variant, certs: Certs
) -> None:
    """On POSIX a stopped listener's port can be listened on again while its
    closed connections are in TIME_WAIT (SO_REUSEADDR), and never while another
    listener holds it."""
    if os.name == "nt":
        pytest.skip("POSIX behaviour; Windows is tests/sockets/test_sockopts.py")

    async def bye(comm: Any) -> None:
        await comm.write("bye")
        await comm.close()  # the server closes first: its end lingers in TIME_WAIT

    args = variant.listen_args(certs)
    async with serve(variant, certs, bye) as listener:
        host, port = listener.get_host_port()
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        assert await asyncio.wait_for(comm.read(), WAIT) == "bye"
        with pytest.raises(CommClosedError):
            await asyncio.wait_for(comm.read(), WAIT)
        await comm.close()
        second = listen(f"{variant.scheme}://{host}:{port}", echo, **args)
        with pytest.raises(OSError):
            await second.start()
        second.stop()
    again = listen(f"{variant.scheme}://{host}:{port}", echo, **args)
    await again.start()
    try:
        await roundtrip(variant, certs, again.contact_address)
    finally:
        again.stop()


# -- items 10 and 11: what the listener logs ----------------------------------

#: The stock listener's lines (distributed.comm.tcp), the templates logged.
CLOSED_IN_HANDSHAKE = "Connection from %s closed before handshake completed"
TLS_FAILED = "Listener on %r: TLS handshake failed with remote %r: %s"


async def check_peer_reset_at_once_logs_as_stock(variant: Variant, certs: Certs) -> None:
    """A health check that connects and resets at once (SO_LINGER 0): one line,
    no traceback, no descriptor kept, the listener still serving."""
    handled = asyncio.Event()

    async def echo_then_say_so(comm: Any) -> None:
        try:
            await echo(comm)
        finally:
            handled.set()

    with distributed_log() as records:
        async with serve(variant, certs, echo_then_say_so) as listener:
            await roundtrip(variant, certs, listener.contact_address)  # warm-up
            await asyncio.wait_for(handled.wait(), WAIT)  # its server end has closed too
            await asyncio.sleep(0)  # the abort that ends it runs in the next iteration
            gc.collect()
            before = _open_fds()
            records.clear()
            sock = socket.create_connection(listener.get_host_port(), timeout=WAIT)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            await _until(lambda: records, "the listener's line")
            await roundtrip(variant, certs, listener.contact_address)
            if variant.ours or not variant.tls:
                # (Stock TLS logs a traceback that holds the socket; pytest's
                # log capture keeps that record, so its descriptor stays open.)
                await _fds_back_to(before)
    logged = [r.template() for r in records]
    if not variant.tls:
        assert logged == [("INFO", CLOSED_IN_HANDSHAKE, False)], logged
        assert records[0].name.startswith("distributed.comm."), records[0].name
    elif variant.ours:
        assert logged == [("WARNING", TLS_FAILED, False)], logged
        assert records[0].name.startswith("distributed.comm."), records[0].name
    else:
        # Stock TLS: CPython's ssl.wrap_socket raises in tornado's accept
        # handler, an asyncio ERROR with a traceback (RELIABILITY.md, kept).
        assert [(r.name, r.levelname) for r in records] == [("asyncio", "ERROR")], logged


async def check_failed_handshakes_are_logged_where_distributed_logs(
    variant: Variant, certs: Certs
) -> None:
    """A peer that leaves before distributed's handshake (plain) or fails the TLS
    handshake (TLS) is logged as by the stock listener, naming the peer, on a
    logger that distributed's default logging config hears."""
    with distributed_log() as records:
        async with serve(variant, certs) as listener:
            peer = RawPeer.connect(listener.contact_address)
            name = variant.scheme + "://" + "%s:%d" % peer.sock.getsockname()[:2]
            if variant.tls:
                await peer.send(b"GET / HTTP/1.0\r\n\r\n")  # not a ClientHello
            else:
                peer.shutdown_write()  # gone before its half of the handshake
            with contextlib.suppress(OSError):
                await peer.wait_closed_by_peer()
            peer.close()
            await _until(lambda: records, "the listener's line")
            await roundtrip(variant, certs, listener.contact_address)
            listen_address = listener.listen_address
    assert [r.name.startswith("distributed.comm.") for r in records] == [True], records
    (record,) = records
    if variant.tls:
        assert record.template() == ("WARNING", TLS_FAILED, False)
        where, remote, reason = record.args
        assert remote == name and where == listen_address, record
        assert str(reason).strip(), record.getMessage()
    else:
        assert record.template() == ("INFO", CLOSED_IN_HANDSHAKE, False)
        assert record.args == (name,)

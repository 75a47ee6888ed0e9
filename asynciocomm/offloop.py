"""The event-loop side of the off-loop TLS layer (``tls-thread``).

:func:`start_tls` hands a connected socket to the process's I/O thread
(:mod:`asynciocomm.tlsthread`), which runs the TLS handshake and all record
work, and returns an :class:`OffloopTransport`: an ``asyncio.Transport`` that
gives :class:`asynciocomm.protocol.FramedProtocol` the calls an asyncio TLS
transport gives it, with plaintext only.

* **Reads**: the thread's events for one loop arrive in batches
  (:class:`Bridge`, one ``call_soon_threadsafe`` per batch); plaintext is
  copied into the protocol's ``get_buffer`` and reported with
  ``buffer_updated``, in order with EOF and the end of the connection.
  ``pause_reading`` holds the rest back; the thread stops reading once enough
  is held.
* **Writes**: buffers are queued by reference and handed to the thread once
  per loop iteration, for every connection of the loop together. The thread
  reports what it has sent, which drives ``pause_writing``/``resume_writing``
  against the transport's limits, as with any asyncio transport.
* **Ending**: ``close()`` goes after the queued writes: the thread sends them,
  then close_notify, waits for the peer's (at most the shutdown timeout) and
  reports the connection lost. ``abort()`` closes the socket at once and
  reports it lost on the next loop iteration.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import ssl
import threading
import weakref
from collections.abc import Callable
from typing import Any

from asynciocomm.config import Settings
from asynciocomm.tlsthread import TLSConnection, io_thread

#: asyncio's default write limits (``high``), used until the protocol sets its own.
DEFAULT_HIGH_WATER = 64 * 1024


class Bridge:
    """One event loop's end of the I/O thread: its inbox (thread -> loop, one
    wake-up per batch) and its outbox (loop -> thread, one hand-over per loop
    iteration)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)
        self.lock = threading.Lock()
        self._items: list[tuple[Any, str, Any]] = []
        self._scheduled = False
        self._dirty: list[OffloopTransport] = []
        self._flush_handle: asyncio.Handle | None = None
        #: batches received (loop wake-ups by the thread) and events in them
        self.wakeups = 0
        self.events = 0

    # -- the I/O thread's side --------------------------------------------------

    def post(self, items: list[tuple[Any, str, Any]]) -> bool:
        with self.lock:
            self._items.extend(items)
            if self._scheduled:
                return True
            self._scheduled = True
        loop = self._loop()
        if loop is None:
            return False
        try:
            loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed
            return False
        return True

    # -- the loop's side --------------------------------------------------------

    def _drain(self) -> None:
        with self.lock:
            items, self._items = self._items, []
            self._scheduled = False
        self.wakeups += 1
        self.events += len(items)
        for handler, kind, payload in items:
            handler.on_event(kind, payload)

    def queue(self, transport: OffloopTransport) -> None:
        """Hand ``transport``'s writes to the thread at the end of this iteration."""
        self._dirty.append(transport)
        if self._flush_handle is None:
            loop = self._loop()
            assert loop is not None
            self._flush_handle = loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        dirty, self._dirty = self._dirty, []
        io_thread().submit(_feed_all, [t.take_out() for t in dirty])


def _feed_all(batch: list[tuple[TLSConnection, list[memoryview], bool]]) -> None:
    for conn, buffers, close in batch:
        conn.guarded(conn.feed, buffers, close)


_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Bridge] = (
    weakref.WeakKeyDictionary()
)


def bridge_for(loop: asyncio.AbstractEventLoop) -> Bridge:
    """The loop's bridge, made on first use."""
    bridge = _bridges.get(loop)
    if bridge is None:
        bridge = _bridges[loop] = Bridge(loop)
    return bridge


def _byte_view(data: Any) -> memoryview:
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class OffloopTransport(asyncio.Transport):
    """A TLS connection whose TLS runs on the I/O thread; plaintext here."""

    def __init__(self, loop: asyncio.AbstractEventLoop, bridge: Bridge,
                 extra: dict[str, Any]) -> None:
        super().__init__(extra)
        self._loop = loop
        self._bridge = bridge
        self.conn: TLSConnection | None = None
        self.handshake: asyncio.Future[None] = loop.create_future()
        self._protocol: Any = None
        self._events: collections.deque[tuple[str, Any]] = collections.deque()
        self._reading_paused = False
        self._closing = False
        self._lost = False
        self._out: list[memoryview] = []
        self._out_close = False
        self._queued = False
        self._written = 0
        self._acked = 0
        self._high = DEFAULT_HIGH_WATER
        self._low = DEFAULT_HIGH_WATER // 4
        self._write_paused = False

    # -- events from the I/O thread ------------------------------------------------

    def on_event(self, kind: str, payload: Any) -> None:
        if self._lost:
            return
        if kind == "sent":
            self._acked = payload
            self._maybe_resume()
        elif kind == "connected":
            self._extra.update(payload)
            if not self.handshake.done():
                self.handshake.set_result(None)
        elif kind == "failed":
            self._lost = True
            if not self.handshake.done():
                self.handshake.set_exception(payload)
        else:
            self._events.append((kind, payload))
            self._process()

    def _process(self) -> None:
        events = self._events
        while events and self._protocol is not None and not self._lost:
            kind, payload = events[0]
            if kind == "lost":
                events.popleft()
                self._connection_lost(payload)
                return
            if self._closing:  # closed here: nothing more is read
                events.popleft()
                continue
            if self._reading_paused:
                return
            events.popleft()
            if kind == "data":
                rest = self._deliver(payload)
                if rest is not None:
                    events.appendleft(("data", rest))
            else:  # "eof": TLS transports close on EOF, whatever the protocol says
                self._protocol.eof_received()

    def _deliver(self, data: bytes | memoryview) -> memoryview | None:
        """Copy ``data`` into the protocol's buffers; what pausing left over."""
        src = memoryview(data)
        n = src.nbytes
        off = 0
        protocol = self._protocol
        try:
            while off < n:
                dst = _byte_view(protocol.get_buffer(n - off))
                k = min(dst.nbytes, n - off)
                dst[:k] = src[off : off + k]
                off += k
                protocol.buffer_updated(k)
                if self._reading_paused or self._closing or self._lost:
                    break
        except Exception as exc:  # noqa: BLE001  (as asyncio: a fatal error)
            self._fatal(exc)
            return None
        assert self.conn is not None
        self.conn.credit(off)
        return src[off:] if off < n and not (self._closing or self._lost) else None

    def _fatal(self, exc: BaseException) -> None:
        self._abort_conn()
        self._connection_lost(exc)

    def _connection_lost(self, exc: BaseException | None) -> None:
        if self._lost and self._protocol is None:
            return
        self._lost = True
        self._closing = True
        self._events.clear()
        self._out = []
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.connection_lost(exc)

    def attach(self, protocol: Any) -> None:
        """Start delivering to ``protocol`` (after the handshake)."""
        self._protocol = protocol
        protocol.connection_made(self)
        self._process()

    # -- reading -------------------------------------------------------------------

    def is_reading(self) -> bool:
        return not self._reading_paused and not self.is_closing()

    def pause_reading(self) -> None:
        self._reading_paused = True

    def resume_reading(self) -> None:
        if self._reading_paused:
            self._reading_paused = False
            self._loop.call_soon(self._process)

    # -- writing -------------------------------------------------------------------

    def write(self, data: Any) -> None:
        if self._closing or self._lost:
            return  # as a closing TLS transport: dropped
        view = _byte_view(data)
        if not view.nbytes:
            return
        self._out.append(view)
        self._written += view.nbytes
        self._queue()
        self._maybe_pause()

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def _queue(self) -> None:
        if not self._queued:
            self._queued = True
            self._bridge.queue(self)

    def take_out(self) -> tuple[TLSConnection, list[memoryview], bool]:
        """The writes (and close) to hand to the thread now."""
        out, self._out = self._out, []
        self._queued = False
        assert self.conn is not None
        return self.conn, out, self._out_close

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return self._written - self._acked

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if high is None:
            high = DEFAULT_HIGH_WATER if low is None else 4 * low
        if low is None:
            low = high // 4
        if not high >= low >= 0:
            raise ValueError(f"high ({high!r}) must be >= low ({low!r}) must be >= 0")
        self._high, self._low = high, low
        self._maybe_pause()

    def _maybe_pause(self) -> None:
        if not self._write_paused and self.get_write_buffer_size() > self._high:
            self._write_paused = True
            if self._protocol is not None:
                self._protocol.pause_writing()

    def _maybe_resume(self) -> None:
        if self._write_paused and self.get_write_buffer_size() <= self._low:
            self._write_paused = False
            if self._protocol is not None:
                self._protocol.resume_writing()

    # -- ending --------------------------------------------------------------------

    def is_closing(self) -> bool:
        return self._closing or self._lost

    def close(self) -> None:
        if self._closing or self._lost:
            return
        self._closing = True
        self._out_close = True
        self._queue()

    def abort(self) -> None:
        if self._lost:
            return
        self._closing = True
        self._out = []
        self._abort_conn()
        self._loop.call_soon(self._connection_lost, None)

    def _abort_conn(self) -> None:
        conn = self.conn
        if conn is not None:
            io_thread().submit(conn.finish, None, False)


def _handshake_info(sock: socket.socket) -> dict[str, Any]:
    info: dict[str, Any] = {"socket": sock}
    for name, get in (("sockname", sock.getsockname), ("peername", sock.getpeername)):
        try:
            info[name] = get()
        except OSError:
            info[name] = None
    return info


async def start_tls(
    sock: socket.socket,
    protocol_factory: Callable[[], Any],
    ctx: ssl.SSLContext,
    settings: Settings,
    *,
    server_side: bool,
    server_hostname: str | None = None,
) -> tuple[OffloopTransport, Any]:
    """TLS over the connected ``sock`` on the I/O thread; the handshake is
    bounded by the connect timeout. On failure ``sock`` is closed."""
    loop = asyncio.get_running_loop()
    try:
        sock.setblocking(False)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        sslobj = ctx.wrap_bio(incoming, outgoing, server_side=server_side,
                              server_hostname=None if server_side else server_hostname)
        info = _handshake_info(sock)
    except BaseException:
        sock.close()
        raise
    info.update(sslcontext=ctx, ssl_object=sslobj)
    bridge = bridge_for(loop)
    transport = OffloopTransport(loop, bridge, info)
    io = io_thread()
    conn = TLSConnection(io, sock, sslobj, incoming, outgoing, bridge, transport,
                         settings.write_low_water, float(settings.tcp_timeout))
    transport.conn = conn
    io.submit(conn.guarded, conn.start)
    try:
        await asyncio.wait_for(asyncio.shield(transport.handshake), settings.connect_timeout)
    except asyncio.TimeoutError:
        transport.abort()
        raise ConnectionAbortedError(
            f"SSL handshake is taking longer than {settings.connect_timeout} seconds: "
            "aborting the connection"
        ) from None
    except BaseException:
        transport.abort()
        raise
    protocol = protocol_factory()
    transport.attach(protocol)
    return transport, protocol

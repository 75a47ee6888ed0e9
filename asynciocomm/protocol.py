"""The asyncio layer: a BufferedProtocol around the sans-I/O codec.

Strategy:

* **Reads.** The event loop receives straight into the buffer the decoder hands
  out (``get_buffer``): the shared receive buffer for headers and small frames, or
  a large frame's own buffer. Complete messages queue in the decoder; ``read()``
  pops one without creating a future when one is waiting. Reading pauses while the
  unread messages exceed ``read-pause`` bytes and resumes below half of it, and
  for one loop iteration after a large message reached a waiting reader
  (:mod:`asynciocomm.reading` owns the switch and says why). A
  message stays unread until ``read()`` has returned it (:meth:`delivered`), also
  while it is deserialized in the offload thread: the reader still holds its
  previous message then, and a third large frame received meanwhile would
  outgrow the buffer pool's two.
* **Writes** live in :class:`asynciocomm.writer.Sender`, which this class makes
  for its transport: admission in call order, batched flushes, write flow
  control, large messages in chunks.
* **Ending.** ``close()`` sends everything already written, then closes and waits
  for the transport to report the connection lost (bounded: it aborts when no
  byte has left for ``timeouts.tcp``). ``abort()`` is immediate. The reason a
  connection ended is kept (clean EOF, truncated message, protocol error, OS or
  TLS error) and raised through :func:`asynciocomm.errors.translate` once the
  messages that arrived before it are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any, cast

from asynciocomm import lifetime
from asynciocomm.config import Settings
from asynciocomm.errors import ProtocolError, detached, translate
from asynciocomm.log import get_logger
from asynciocomm.loops import of_uvloop
from asynciocomm.pool import BufferPool, shared_pool
from asynciocomm.reading import ReadSwitch
from asynciocomm.sockets.sockopts import configure_socket
from asynciocomm.transport_traits import TransportTraits
from asynciocomm.wire.buffers import default_allocator
from asynciocomm.wire.speedups import FrameDecoder, encode_frames, encode_single
from asynciocomm.writer import Sender

logger = get_logger(__name__)


#: Whether a lost TLS transport of the plain asyncio loop must be closed by its
#: protocol (see FramedProtocol.connection_lost): before CPython 3.11 only.
_MARK_TLS_CLOSED = sys.version_info < (3, 11)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

#: A plaintext TLS alert record: fatal, protocol_version (RFC 8446, 6.2).
TLS_PROTOCOL_VERSION_ALERT = bytes([21, 3, 1, 0, 2, 2, 70])
#: Seconds close() waits, over TLS, for the close_notify exchange once the TLS
#: layer has taken every byte written. The stock comm never waits for its peer
#: (it shuts its socket down once flushed); a live peer answers within a loop
#: iteration or two, and a peer whose event loop is blocked must not stall, say,
#: a scheduler's shutdown. Past it close() returns and the transport finishes
#: on its own: it still sends what it holds, then the close_notify, and gives up
#: only after its shutdown timeout (see tlsargs.tls_timeouts), as the kernel
#: gives up on the stock comm's unsent bytes after TCP_USER_TIMEOUT.
CLOSE_NOTIFY_WAIT = 0.2
#: Seconds a peer that broke the protocol has to take the bytes already written
#: to it before its connection is reset (see FramedProtocol._protocol_failure).
PROTOCOL_ERROR_GRACE = 1.0


def frame_pool(settings: Settings) -> BufferPool | None:
    """The pool large frames' own buffers come from, unless it is off."""
    if settings.buffer_pool <= 0:
        return None
    return shared_pool(settings.buffer_pool, settings.buffer_pool_min_size,
                       settings.buffer_pool_idle)


class FramedProtocol(asyncio.BufferedProtocol):
    """One connection: decoder, read waiter, write batch and flow control.

    ``on_connect`` is called from ``connection_made`` (listeners use it to create
    the comm). ``name`` is used in error messages; the comm sets it.
    """

    def __init__(
        self,
        settings: Settings,
        on_connect: Callable[[FramedProtocol], None] | None = None,
    ) -> None:
        self.settings = settings
        self._coalesce = settings.coalesce
        self.name = "asynciocomm connection"
        self._on_connect = on_connect
        # Attached while connected: the pool holds memory only for live connections.
        self._pool = frame_pool(settings)
        self._decoder = FrameDecoder(
            read_buffer=settings.read_buffer,
            direct_read=settings.direct_read,
            max_frames=settings.max_frames,
            max_message=settings.max_message,
            allocate=default_allocator() if self._pool is None else self._pool.allocate,
        )
        # The transport calls the decoder's get_buffer itself: no Python frame
        # of ours per receive.
        self.get_buffer = self._decoder.get_buffer  # type: ignore[method-assign]
        self.transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._read_waiter: asyncio.Future[None] | None = None
        self._reading: ReadSwitch | None = None  # made with the transport
        # Payload bytes of the message read() took and has not returned yet.
        self._delivering = 0
        self._sender: Sender | None = None
        self._eof = False
        self._lost = False
        self._closing = False
        self._exc: BaseException | None = None
        self._lost_waiter: asyncio.Future[None] | None = None
        self._abort_handle: asyncio.Handle | None = None
        self._tls = False
        # Held while connected (see asynciocomm.lifetime).
        self._loop_guard: AsyncGenerator[None, None] | None = None

    # -- asyncio callbacks ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the Transport API without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()
        self._lost_waiter = self._loop.create_future()
        if self._pool is not None:
            self._pool.attach()
        traits = TransportTraits.of(transport)
        self._tls = traits.tls
        self._sender = Sender(self.settings, self.transport, self._loop, traits)
        settings = self.settings
        self._reading = ReadSwitch(
            self.transport, self._loop, settings.read_pause,
            settings.buffer_pool_min_size if self._pool is not None else None)
        self._loop_guard = lifetime.track(self)
        configure_socket(transport.get_extra_info("socket"), self.settings.tcp_timeout)
        # Called once, then dropped: the listener that passed it must not be
        # kept alive by its connections (nor be in a cycle through them).
        on_connect, self._on_connect = self._on_connect, None
        if on_connect is not None:
            on_connect(self)

    def buffer_updated(self, nbytes: int) -> None:
        decoder = self._decoder
        queued = decoder.queued_bytes
        try:
            decoder.buffer_updated(nbytes)
        except ProtocolError as exc:
            self._protocol_failure(exc)
            return
        reading = self._reading
        assert reading is not None
        woke = bool(decoder.messages) and self._wake_reader()
        reading.received(decoder.queued_bytes - queued, woke,
                         decoder.queued_bytes + self._delivering)

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        # While complete messages are unread, a plain connection stays open for
        # writing, as the stock comm's does until its reader reaches the end:
        # replies to those requests still go to the kernel. Otherwise (and
        # always over TLS, whose transports close on EOF whatever we return)
        # our side closes too.
        return bool(self._decoder.messages) and not self._tls

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._pool is not None:
            self._pool.detach()
        if self._exc is None and exc is not None:
            self._exc = detached(exc)
        if self._sender is not None:
            self._sender.connection_lost()
        if self._abort_handle is not None:
            self._abort_handle.cancel()
            self._abort_handle = None
        self._wake_reader()
        if self._lost_waiter is not None and not self._lost_waiter.done():
            self._lost_waiter.set_result(None)
        if self._reading is not None:
            self._reading.detach()
        transport = self.transport
        if _MARK_TLS_CLOSED and transport is not None and self.tls and not of_uvloop(transport):
            # CPython 3.10's asyncio TLS transport is not marked closed when its
            # connection is lost under it (the peer went), and warns "unclosed
            # transport" (ResourceWarning) when collected; 3.11's rewrite of
            # sslproto marks it. Closing it here changes nothing else: the
            # connection is gone.
            transport.close()
        self.transport = None  # break the transport <-> protocol cycle
        self._loop_guard = None

    # -- state helpers -----------------------------------------------------------

    def _protocol_failure(self, exc: ProtocolError) -> None:
        """Refuse a peer that broke the protocol: read nothing more and end the
        connection now. It ends with a FIN after what we already wrote, not a
        RST: a reset makes the peer's kernel drop data it has not read yet, and
        that data (our handshake, in plain text) is what tells a TLS client that
        it reached a plain listener, so it fails at once instead of retrying.
        A peer that does not take those bytes is aborted after a short grace."""
        head = self._decoder.peek(3)
        sender = self._sender
        assert sender is not None
        if head[:1] == b"\x16" and head[1:2] == b"\x03" and not self._tls:
            # A TLS ClientHello on a plain listener: say so in TLS, so the client
            # fails at once with a fatal TLS error instead of retrying.
            exc = ProtocolError(f"a TLS client reached a plain listener ({exc})")
            sender.send_now(TLS_PROTOCOL_VERSION_ALERT)
        logger.warning("Aborting %s: %s", self.name, exc)
        self._exc = detached(exc)
        sender.flush()  # what we wrote before the failure is owed to the peer
        sender.abort()
        self._closing = True
        transport = self.transport
        if transport is not None:
            assert self._reading is not None
            self._reading.stop()
            transport.close()
            assert self._loop is not None
            self._loop.call_later(PROTOCOL_ERROR_GRACE, transport.abort)
        self._wake_reader()

    def _wake_reader(self) -> bool:
        """Resolve read()'s waiter; True if a reader was waiting."""
        waiter = self._read_waiter
        if waiter is not None:
            self._read_waiter = None
            if not waiter.done():
                waiter.set_result(None)
                return True
        return False

    @property
    def tls(self) -> bool:
        """Whether the connection is TLS (worked out once, from its transport)."""
        return self._tls

    @property
    def is_closed(self) -> bool:
        """The connection is gone or going: nothing more can be written."""
        return self._lost or self._closing or self.transport is None

    @property
    def ended(self) -> bool:
        """The connection is gone or going, from either side: closed or
        aborted here, lost, or the peer's end received (a TLS transport then
        closes itself). What the stock comm's stream reports as closed."""
        transport = self.transport
        return self.is_closed or self._eof or transport is None or transport.is_closing()

    @property
    def finished(self) -> bool:
        """Ended, and every complete message has been read: what the stock
        comm's ``closed()`` reports (it turns True when its reader reaches the
        end of the stream, not when the peer's FIN arrives)."""
        return (
            (self._lost or self._closing or self._eof or self.transport is None)
            and not self._decoder.messages
        )

    @property
    def unread_after_end(self) -> bool:
        """The peer has gone but messages it sent are still unread."""
        return bool(self._decoder.messages) and not self._closing

    def closed_error(self) -> Exception:
        """The distributed error describing why this connection ended."""
        exc = self._exc
        if exc is None and (self._eof or self._lost) and not self._decoder.at_boundary:
            exc = ProtocolError(
                "connection closed in the middle of a message "
                f"({self._decoder.buffered_partial} bytes of it received)"
            )
        return translate(self.name, exc)

    def extra_info(self, name: str, default: Any = None) -> Any:
        return default if self.transport is None else self.transport.get_extra_info(name, default)

    # -- reading -----------------------------------------------------------------

    def read_nowait(self) -> tuple[list[memoryview], int] | None:
        """The next message's frames and size, or None if none has arrived yet.

        The message counts as unread until :meth:`delivered`. Raises the
        translated error once the connection has ended and every complete
        message has been read.
        """
        decoder = self._decoder
        if decoder.messages:
            item = decoder.pop()
            self._delivering = item[1]
            return item
        if self._eof or self._lost or self._closing:
            raise self.closed_error()
        return None

    def delivered(self) -> None:
        """The message taken by :meth:`read_nowait` was returned to the reader
        (or failed to deserialize): resume reading once the unread messages are
        at most half of ``read-pause``."""
        self._delivering = 0
        if self._reading is not None:
            self._reading.delivered(self._decoder.queued_bytes)

    def handshaken(self) -> None:
        """distributed's handshake is over: the next write is the application's
        first, and goes at once as a lone write does (see Sender._accept). The
        handshake's own read may not have waited (the peer's handshake was there
        already, and on CPython 3.10 distributed's ``wait_for`` runs that read in a
        task of its own), which would otherwise leave the first message batched
        for a loop iteration."""
        if self._sender is not None:
            self._sender.reader_waits()

    def readable(self) -> asyncio.Future[None]:
        """A future resolved when a message arrives or the connection ends."""
        assert self._loop is not None
        if self._sender is not None:
            self._sender.reader_waits()
        waiter = self._read_waiter = self._loop.create_future()
        return waiter

    # -- writing -----------------------------------------------------------------

    def send(self, frames: bytes | list[Any]) -> int | Coroutine[Any, Any, int]:
        """Put one message (its one frame as ``bytes``, or its frames) on the
        wire as the stock writer frames it. Returns its size on the wire when it
        was accepted at once, or a coroutine that returns it once the message
        is accepted, after waiting its turn (flow control, or writers before it)
        or finding the connection gone. Raises TypeError, before anything is
        queued, where the stock writer cannot take a buffer. Cancelling the wait
        leaves nothing of the message queued and the connection as it was."""
        if type(frames) is bytes:
            buffers, nbytes = encode_single(frames, self._coalesce)
        else:
            buffers, nbytes = encode_frames(frames, self._coalesce)
        transport = self.transport
        sender = self._sender
        if self.is_closed or transport is None or sender is None or transport.is_closing():
            # is_closing(): closed under us (an OS error, the peer's EOF) before
            # connection_lost is reported; writing then fails inside the transport.
            return self._refused(nbytes)
        waiting = sender.send(buffers, nbytes)
        return nbytes if waiting is None else self._sent_in_turn(waiting, nbytes)

    async def _sent_in_turn(self, waiting: Coroutine[Any, Any, bool], nbytes: int) -> int:
        if not await waiting:
            self._refuse_write()
        return nbytes

    async def _refused(self, nbytes: int) -> int:
        self._refuse_write()
        return nbytes

    def _refuse_write(self) -> None:
        """The connection cannot take this write: raise, unless the peer has
        gone while messages it sent are still unread. The comm is not
        ``closed()`` then (see :attr:`finished`), so, as with the stock comm,
        whose writes go to a kernel that drops them once the peer is gone, the
        write returns and its bytes are lost with the connection; the reader
        gets the remaining messages, then the error."""
        if not self.unread_after_end:
            raise self.closed_error()

    def pause_writing(self) -> None:
        if self._sender is not None:
            self._sender.pause_writing()

    def resume_writing(self) -> None:
        if self._sender is not None:
            self._sender.resume_writing()

    # -- ending ------------------------------------------------------------------

    async def close(self) -> None:
        """Send everything written so far, then close.

        Waiting for the send is bounded by the kernel's dead-peer detection
        (keepalive and TCP_USER_TIMEOUT from ``timeouts.tcp``), as with the stock
        comm; only the final close handshake (TLS close_notify) gets a timer, so a
        large backlog is never cut short by it.
        """
        if self._closing:
            return
        self._closing = True
        try:
            if self._sender is not None:
                await self._sender.finish()  # False: the connection went first (as stock)
        finally:
            if self.transport is not None:
                self.transport.close()
        waiter = self._lost_waiter
        if waiter is None or waiter.done():
            return
        if self._tls:
            # The plain transport under the TLS one may still hold ciphertext
            # (its buffer is not in the count we waited on): never abort here.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiter), CLOSE_NOTIFY_WAIT)
            return
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.settings.connect_timeout)
        except asyncio.TimeoutError:
            self.abort()  # the transport had sent everything: nothing is cut

    def abort(self, *, now: bool = False) -> None:
        """Close the connection now, losing no more than the stock comm would.

        What ``write()`` accepted goes to the kernel as far as it takes it at
        once, as with the stock comm (which writes eagerly and closes its
        socket): the pending batch is handed to the transport first, and the
        transport is aborted one loop iteration later, once it has made its
        send attempt (uvloop and TLS transports queue small writes until the
        end of the iteration). Nothing more is read.

        ``now``: no later iteration will run (the loop is shutting down), so the
        transport is aborted at once, even when an abort is already scheduled
        or the transport is closing (it holds its handle while it flushes).
        """
        self._closing = True
        transport = self.transport
        if transport is None or (self._abort_handle is not None and not now):
            return
        if self._sender is not None:
            self._sender.abort()
        self._wake_reader()
        loop = self._loop
        if (not now and loop is not None and _running_loop() is loop
                and not transport.is_closing()):
            assert self._reading is not None
            self._reading.stop()
            self._abort_handle = loop.call_soon(transport.abort)
            return
        if self._abort_handle is not None:
            self._abort_handle.cancel()
            self._abort_handle = None
        transport.abort()

    def close_at_loop_shutdown(self) -> None:
        """asynciocomm.lifetime's hook: the event loop is shutting down."""
        self.abort(now=True)

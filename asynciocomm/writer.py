"""The write side of a connection: batching, flow control, large frames.

Strategy:

* **Writes.** A message written when nothing else is waiting to go is handed to
  the transport at once (write-through): a request or a reply leaves without
  waiting for the loop to turn. Messages written after it, before the loop turns
  or the reader waits, go to a batch that one ``call_soon`` callback flushes, in
  as few transport calls as the transport allows (:func:`write_mode`): one
  writev on uvloop; one ``writelines`` over TLS, small buffers joined, so the
  batch is encrypted into one ciphertext send; one ``write`` per run of small
  buffers and per large frame on asyncio's socket transport. Large frames stay
  references. Over TLS, a message of 32 KiB or more always goes at once when
  nothing is batched: batching it would only encrypt a whole batch into one
  buffer. A writer waits for a drain while the transport is above its
  high-water mark.
* **Large frames on the plain asyncio loop, and over TLS.** Python < 3.12's
  socket transport copies whatever the kernel does not take at once into a
  bytearray and sends from it; for a 128 MiB frame that collapses to a fraction of
  uvloop's speed. Large frames there are written in chunks, each handed over only
  when the transport's buffer is empty, so the kernel reads them from the
  caller's memory and at most one chunk's tail is ever copied. TLS transports (on
  either loop) encrypt a whole write into one buffer before any of it leaves;
  they get smaller chunks (``TLS_WRITE_CHUNK``), paced by the ordinary write
  flow control. Public transport API only.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from asynciocomm.config import Settings
from asynciocomm.encoder import Buffer

#: Chunk size for large frames on transports that copy unsent data (the plain
#: asyncio loop before 3.12): each chunk is handed over only when the buffer is
#: empty, so at most this much is ever copied; 4 MiB matches Linux's largest
#: socket send buffer, so one chunk usually leaves in one send().
LARGE_WRITE_CHUNK = 4 * 1024 * 1024
#: Chunk size for large frames over TLS (either loop). The transport encrypts
#: each write into its memory BIO and reads the ciphertext out as one bytes
#: object: with 4 MiB chunks those buffers came and went above glibc's trim
#: threshold, so each was fresh memory: 342 (uvloop) and 1,603 (asyncio loop)
#: page faults per 16 MiB message, 2,280 and 11,377 per 128 MiB one, against
#: 0-5 with 256 KiB chunks, which also stay in the CPU's L2 cache. Measured,
#: 8 pairs, loaded machine: the sender's CPU per message 1.22-1.24x lower on
#: the asyncio loop (16 and 128 MiB), no measurable difference on uvloop, in
#: throughput or in the receiver's CPU.
TLS_WRITE_CHUNK = 256 * 1024
#: Messages from this size up take that path on such transports. Below it, a
#: copy of the unsent tail costs less than waiting for the buffer to empty.
LARGE_WRITE_MIN = 256 * 1024
#: Over TLS, messages from this size up are handed to the transport as they are
#: written, never batched (see BatchWriter.send). Their large frame becomes TLS
#: records of its own either way; batching them only makes the transport
#: encrypt up to the high-water mark into one ciphertext buffer, and its copies
#: then run out of the CPU's caches. Measured, one-way, 3-4 pairs: 64 KiB
#: messages 1.30-1.42 -> 1.52-1.62 GiB/s on the asyncio loop, 1.38-1.46 ->
#: 1.48-1.64 on uvloop; 32 KiB 1.09-1.13 -> 1.17-1.24 (asyncio loop); but
#: 16 KiB 0.78-0.80 -> 0.71-0.75 (the receiver then gets many small reads),
#: hence 32 KiB.
TLS_WRITE_THROUGH_MIN = 32 * 1024
#: No such bound (no message reaches it) on the transports that gain from
#: batching large messages: asyncio's TCP transport (64 KiB: 2.46-2.57 GiB/s
#: batched, 1.94-2.13 not) and uvloop's, which sends a batch with one writev.
NO_WRITE_THROUGH_MIN = sys.maxsize


def keeps_references(transport: asyncio.BaseTransport) -> bool:
    """uvloop's transports write buffers by reference (writev), so a batch can be
    handed over as a list without joining or copying."""
    return type(transport).__module__.startswith("uvloop")


#: How a batch of buffers is handed to a transport (see write_mode).
WRITEV = 0
JOIN_THEN_WRITELINES = 1
JOIN_THEN_WRITE = 2


def write_mode(transport: asyncio.BaseTransport) -> int:
    """How this transport takes a batch in the fewest calls without copies.

    * ``WRITEV``: uvloop's TCP transport sends a list with one writev, by
      reference.
    * ``JOIN_THEN_WRITELINES``: TLS transports (either loop) encrypt each buffer
      of a ``writelines`` call in turn into one ciphertext buffer and send that
      once, but each buffer becomes at least one TLS record; so runs of small
      buffers are joined first. One ``write`` per buffer instead flushes and
      sends each one separately. Measured (3 pairs per case, one-way): 64 KiB
      messages 1.24-1.28 -> 1.25-1.29 GiB/s on the asyncio loop and 1.28-1.34 ->
      1.32-1.35 on uvloop; 1 KiB messages on uvloop 5.3-5.6 -> 4.4-5.2 µs
      each (uvloop's writelines had passed every small buffer as its own
      record).
    * ``JOIN_THEN_WRITE``: asyncio's TCP transport joins a list into one new
      bytes object (before Python 3.12): runs of small buffers are joined, large
      ones written as they are.
    """
    if _is_tls(transport):
        return JOIN_THEN_WRITELINES
    if keeps_references(transport):
        return WRITEV
    return JOIN_THEN_WRITE


def coalesced(batch: list[Buffer], coalesce: int) -> list[Buffer]:
    """``batch`` with every run of buffers under ``coalesce`` bytes joined."""
    out: list[Buffer] = []
    run: list[Buffer] = []
    for buf in batch:
        if len(buf) < coalesce:
            run.append(buf)
            continue
        if run:
            out.append(b"".join(run) if len(run) > 1 else run[0])
            run = []
        out.append(buf)
    if run:
        out.append(b"".join(run) if len(run) > 1 else run[0])
    return out


def _is_tls(transport: asyncio.BaseTransport) -> bool:
    return transport.get_extra_info("sslcontext") is not None


def write_through_min(transport: asyncio.BaseTransport) -> int:
    """Messages from this size up are never batched on this transport."""
    return TLS_WRITE_THROUGH_MIN if _is_tls(transport) else NO_WRITE_THROUGH_MIN


def copies_large_writes(transport: asyncio.BaseTransport) -> bool:
    """asyncio's own socket transport copies a partial send's remainder, and
    before Python 3.12 shifts that copy on every send."""
    return not keeps_references(transport) and not _is_tls(transport)


def chunk_large_writes(transport: asyncio.BaseTransport) -> bool:
    """Whether large frames go to this transport in chunks. Besides the copying
    socket transport: every TLS transport, asyncio's or uvloop's, encrypts a
    whole write at once into one ciphertext buffer before a byte leaves, so the
    peer waits for all of it. Measured, 128 MiB messages: 0.40 (asyncio loop) /
    0.85 (uvloop) GiB/s whole, 1.8 / 1.8-2.1 GiB/s in chunks; the stock tls comm
    does 1.65 / 0.95-1.64."""
    return _is_tls(transport) or copies_large_writes(transport)


class BatchWriter:
    """Mixin of :class:`asynciocomm.protocol.FramedProtocol`: its write side.

    The protocol owns the state below (set in its ``__init__`` and
    ``connection_made``) and the connection's lifecycle (``is_closed``,
    ``closed_error``, ``_lost``).
    """

    settings: Settings
    transport: asyncio.Transport | None
    _loop: asyncio.AbstractEventLoop | None
    _lost: bool
    _write_paused: bool
    _drain_waiter: asyncio.Future[None] | None
    _batch: list[Buffer]
    _batch_nbytes: int
    _flush_handle: asyncio.Handle | None
    _wrote_through: bool
    _write_mode: int
    _write_through_min: int
    _chunk_large: bool
    _chunk_until_empty: bool
    _large_writer: asyncio.Future[None] | None

    if TYPE_CHECKING:  # provided by the protocol

        @property
        def is_closed(self) -> bool: ...

        @property
        def unread_after_end(self) -> bool: ...

        def closed_error(self) -> Exception: ...

    def _refuse_write(self) -> None:
        """The connection cannot take this write: raise, unless the peer has
        gone while messages it sent are still unread. The comm is not
        ``closed()`` then (see FramedProtocol.finished), so, as with the stock
        comm, whose writes go to a kernel that drops them once the peer is
        gone, the write returns and its bytes are lost with the connection;
        the reader gets the remaining messages, then the error."""
        if not self.unread_after_end:
            raise self.closed_error()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drain()

    def _drop_batch(self) -> None:
        self._batch = []
        self._batch_nbytes = 0

    def _wake_drain(self) -> None:
        waiter = self._drain_waiter
        if waiter is not None:
            self._drain_waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def send(self, buffers: list[Buffer], nbytes: int) -> Coroutine[Any, Any, None] | None:
        """Queue one encoded message. Returns None when done, or a coroutine the
        caller must await (flow control, or ordering behind a chunked write)."""
        transport = self.transport
        if self.is_closed or transport is None or transport.is_closing():
            # is_closing(): closed under us (an OS error, the peer's EOF) before
            # connection_lost is reported; writing then fails inside the transport.
            self._refuse_write()
            return None
        if self._large_writer is not None or (self._chunk_large and nbytes >= LARGE_WRITE_MIN):
            return self._send_slow(buffers, nbytes)
        if (
            self._flush_handle is None
            and not self._write_paused
            and (not self._wrote_through or nbytes >= self._write_through_min)
        ):
            # Write-through: nothing is waiting to go, so this message leaves
            # now instead of one loop iteration later. Only the first one: the
            # writes after it batch up as usual until a flush callback has run
            # or the reader waits (either means the loop turned), so a tight
            # write loop still makes one syscall per batch, not one per message.
            # A writer that never reads and writes once per iteration thus
            # alternates: one write through, the next flushed an iteration later.
            # Over TLS, a large message always goes now (TLS_WRITE_THROUGH_MIN).
            self._wrote_through = True
            self._write_out(transport, buffers)
            return self._drain() if self._write_paused else None
        self._batch.extend(buffers)
        self._batch_nbytes += nbytes
        if self._flush_handle is None:
            assert self._loop is not None
            self._flush_handle = self._loop.call_soon(self._flush_soon)
        if self._write_paused or self._batch_nbytes >= self.settings.write_high_water:
            # The batch counts against the high-water mark like the transport's
            # buffer: a tight write loop that never yields still gets flushed
            # and, once the transport is full, waits.
            self._flush()
            if self._write_paused:
                return self._drain()
        return None

    async def _send_slow(self, buffers: list[Buffer], nbytes: int) -> None:
        while self._large_writer is not None:  # keep order behind a chunked write
            await asyncio.shield(self._large_writer)
            if self.is_closed:
                self._refuse_write()
                return
        if self._chunk_large and nbytes >= LARGE_WRITE_MIN:
            await self._write_chunked(buffers)
            return
        waiting = self.send(buffers, nbytes)
        if waiting is not None:
            await waiting

    def _flush_soon(self) -> None:
        self._wrote_through = False  # the loop turned: the next write may go now
        self._flush()

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        batch = self._batch
        if not batch:
            return
        self._drop_batch()
        transport = self.transport
        if transport is not None and not transport.is_closing():
            self._write_out(transport, batch)
        # else the connection is gone or going (closed under us): the batch goes
        # with it, as a transport's unsent buffer would.

    def _write_out(self, transport: asyncio.Transport, batch: list[Buffer]) -> None:
        """Hand one batch to the transport, in as few calls as it allows."""
        if len(batch) == 1:
            transport.write(batch[0])
            return
        mode = self._write_mode
        if mode == WRITEV:
            transport.writelines(batch)
            return
        out = coalesced(batch, self.settings.coalesce)
        if mode == JOIN_THEN_WRITELINES:
            transport.writelines(out)
        else:
            for buf in out:
                transport.write(buf)

    async def _drain(self) -> None:
        while self._write_paused and not self._lost:
            waiter = self._drain_waiter
            if waiter is None:
                assert self._loop is not None
                waiter = self._drain_waiter = self._loop.create_future()
            await waiter
        if self._lost:
            self._refuse_write()

    async def _wait_until_sent(self) -> None:
        """Wait until the transport has handed every queued byte to the kernel."""
        transport = self.transport
        if transport is None or not transport.get_write_buffer_size():
            return
        s = self.settings
        transport.set_write_buffer_limits(high=0, low=0)  # pauses us now, resumes at 0
        try:
            await self._drain()
        finally:
            if self.transport is not None:
                self.transport.set_write_buffer_limits(
                    high=s.write_high_water, low=s.write_low_water
                )

    async def _chunk_sent(self) -> None:
        """Wait until the next chunk may go: until the socket transport's buffer
        is empty where it would copy the chunk, else (TLS, which encrypts into
        new buffers anyway) while flow control holds writers back."""
        if self._chunk_until_empty:
            await self._wait_until_sent()
        elif self._write_paused:
            await self._drain()

    async def _write_chunked(self, buffers: list[Buffer]) -> None:
        assert self._loop is not None
        self._flush()
        done = self._large_writer = self._loop.create_future()
        # The copying socket transport (waits until empty) or TLS.
        chunk = LARGE_WRITE_CHUNK if self._chunk_until_empty else TLS_WRITE_CHUNK
        try:
            await self._chunk_sent()
            for buf in buffers:
                view = memoryview(buf)
                for i in range(0, view.nbytes, chunk):
                    transport = self.transport
                    if transport is None or transport.is_closing():
                        self._refuse_write()
                        return
                    transport.write(view[i : i + chunk])
                    await self._chunk_sent()
        finally:
            self._large_writer = None
            done.set_result(None)

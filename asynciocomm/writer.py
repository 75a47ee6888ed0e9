"""The write side of a connection: admission, batching, large frames, flow control.

Strategy:

* **Admission.** ``write()`` either accepts a message at once, without
  suspending, or waits its turn *before* anything of it is queued: writers wait
  in the order they called, one future each, while the transport is above its
  high-water mark or a large message is still being handed over. So a write
  that returned is delivered whatever happens to its writer afterwards, a
  writer cancelled or timed out while it waits has sent nothing and fails no
  other writer, and messages leave in the order ``write()`` was called: the
  stock comm's promises (it queues without waiting), with a bound on memory.
* **Batches.** A message accepted when nothing else is waiting to go is handed
  to the transport at once (write-through): a request or a reply leaves
  without waiting for the loop to turn. Messages accepted after it, before the
  loop turns or the reader waits, go to a batch that one ``call_soon`` callback
  flushes, in as few transport calls as the transport allows
  (:class:`TransportTraits`): one writev on uvloop; one ``writelines`` over TLS,
  small buffers joined, so the batch is encrypted into one ciphertext send; one
  ``write`` per run of small buffers and per large frame on asyncio's socket
  transport. Large frames stay references. Over TLS, a message of 32 KiB or
  more always goes at once when nothing is batched: batching it would only
  encrypt a whole batch into one buffer.
* **Large messages on the plain asyncio loop, and over TLS.** Python < 3.12's
  socket transport copies whatever the kernel does not take at once into a
  bytearray and sends from it; for a 128 MiB frame that collapses to a fraction
  of uvloop's speed. Large messages there are accepted whole and handed over in
  chunks by the sender itself (not by the writer's task, which may be
  cancelled), each when the transport's buffer is empty, so the kernel reads
  them from the caller's memory and at most one chunk's tail is ever copied.
  TLS transports (on either loop) encrypt a whole write into one buffer before
  any of it leaves; they get chunks too (``WRITE_CHUNK``), paced by the
  ordinary write flow control. Public transport API only; the sizes and what
  each transport does are in :mod:`asynciocomm.transport_traits`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Coroutine
from typing import Any

from asynciocomm.config import Settings
from asynciocomm.transport_traits import (
    JOIN_THEN_WRITELINES,
    LARGE_WRITE_MIN,
    WRITE_CHUNK,
    WRITEV,
    TransportTraits,
)
from asynciocomm.wire.encoder import Buffer


class Sender:
    """The write side of one connection (see the module docstring).

    Made by the protocol in ``connection_made``; the protocol forwards the
    transport's ``pause_writing``/``resume_writing`` and tells it when the
    connection broke (:meth:`abort`, :meth:`connection_lost`). Its waits answer
    True when done and False when the connection broke first: the protocol
    turns that into distributed's error, so this class holds no reference to
    it (a protocol <-> sender cycle would keep every closed connection alive
    until the garbage collector runs).
    """

    def __init__(self, settings: Settings, transport: asyncio.Transport,
                 loop: asyncio.AbstractEventLoop, traits: TransportTraits) -> None:
        self._transport: asyncio.Transport | None = transport
        self._loop = loop
        self._high = settings.write_high_water
        self._low = settings.write_low_water
        self._coalesce = settings.coalesce
        self._mode = traits.mode
        self._write_through_min = traits.write_through_min
        self._chunk_large = traits.chunk_large
        self._chunk_until_empty = traits.chunk_until_empty
        self._chunk = WRITE_CHUNK
        self._zero_high = 1 if traits.tls else 0
        self._paused = False  # the transport is above its high-water mark
        self._broken = False  # aborted or lost: nothing more is sent
        self._finishing = False  # close() is waiting for everything to leave
        self._limits_zero = False  # high=low=0: resume_writing when empty
        # Accepted, not handed to the transport yet: the batch of this loop
        # iteration, and the chunks of large messages.
        self._batch: list[Buffer] = []
        self._batch_nbytes = 0
        self._flush_handle: asyncio.Handle | None = None
        self._wrote_through = False
        self._pending: deque[Buffer] = deque()
        # Writers waiting their turn, in the order they called write().
        self._waiters: deque[asyncio.Future[bool]] = deque()
        self._progress: asyncio.Future[None] | None = None
        transport.set_write_buffer_limits(high=self._high, low=self._low)

    # -- admission ---------------------------------------------------------------

    def send(self, buffers: list[Buffer], nbytes: int) -> Coroutine[Any, Any, bool] | None:
        """Accept one encoded message now (None), or a coroutine that waits its
        turn and accepts it then (True), or finds the connection broken (False)."""
        if self._waiters or self._paused or self._pending:
            return self._send_in_turn(buffers, nbytes)
        self._accept(buffers, nbytes)
        return None

    async def _send_in_turn(self, buffers: list[Buffer], nbytes: int) -> bool:
        if self._broken:
            return False
        waiter: asyncio.Future[bool] = self._loop.create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            # Cancelled: nothing of the message was queued. If the turn had
            # come already, it passes to the next writer.
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            if waiter.done() and not waiter.cancelled():
                self._progressed()
            raise
        if self._broken:
            return False
        assert self._waiters[0] is waiter
        self._waiters.popleft()
        self._accept(buffers, nbytes)
        self._progressed()
        return True

    def _room(self) -> bool:
        return not (self._paused or self._pending or self._broken
                    or self._batch_nbytes >= self._high)

    def _progressed(self) -> None:
        """Something left or was accepted: give the next writer its turn if
        there is room, and wake close() to look again."""
        waiters = self._waiters
        if waiters and not waiters[0].done() and self._room():
            waiters[0].set_result(True)
        progress = self._progress
        if progress is not None and not progress.done():
            progress.set_result(None)

    def _accept(self, buffers: list[Buffer], nbytes: int) -> None:
        transport = self._transport
        assert transport is not None
        if self._chunk_large and nbytes >= LARGE_WRITE_MIN:
            self.flush()  # what was accepted before it goes first
            self._pending += chunks(buffers, self._chunk)
            self._pump()
            return
        if self._flush_handle is None and (
                not self._wrote_through or nbytes >= self._write_through_min):
            # Write-through: nothing is waiting to go, so this message leaves
            # now instead of one loop iteration later. Only the first one: the
            # writes after it batch up as usual until a flush callback has run
            # or the reader waits (either means the loop turned), so a tight
            # write loop still makes one syscall per batch, not one per message.
            # Over TLS, a large message always goes now (TLS_WRITE_THROUGH_MIN).
            self._wrote_through = True
            self._write_out(transport, buffers)
            return
        self._batch.extend(buffers)
        self._batch_nbytes += nbytes
        if self._flush_handle is None:
            self._flush_handle = self._loop.call_soon(self._flush_soon)
        if self._batch_nbytes >= self._high:
            # The batch counts against the high-water mark like the transport's
            # buffer: a tight write loop that never yields is flushed, and its
            # next write waits once the transport is full.
            self.flush()

    def reader_waits(self) -> None:
        """The reader waits, so the loop turns before this task writes again:
        the next write may go through at once."""
        self._wrote_through = False

    # -- handing over ------------------------------------------------------------

    def _flush_soon(self) -> None:
        self._wrote_through = False  # the loop turned: the next write may go now
        self.flush()

    def flush(self) -> None:
        """Hand the batch to the transport now."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        batch = self._batch
        if not batch:
            return
        self._batch = []
        self._batch_nbytes = 0
        transport = self._transport
        if transport is not None and not transport.is_closing():
            self._write_out(transport, batch)
        # else the connection is gone or going (closed under us): the batch goes
        # with it, as a transport's unsent buffer would.

    def send_now(self, buffer: Buffer) -> None:
        """Hand one buffer over after everything accepted (a TLS alert to a
        peer that broke the protocol)."""
        self._batch.append(buffer)
        self.flush()

    def _write_out(self, transport: asyncio.Transport, batch: list[Buffer]) -> None:
        """Hand one batch to the transport, in as few calls as it allows."""
        if len(batch) == 1:
            transport.write(batch[0])
            return
        mode = self._mode
        if mode == WRITEV:
            transport.writelines(batch)
            return
        out = coalesced(batch, self._coalesce)
        if mode == JOIN_THEN_WRITELINES:
            transport.writelines(out)
        else:
            for buf in out:
                transport.write(buf)

    def _pump(self) -> None:
        """Hand the chunks of large messages over while the transport takes
        them: when its buffer is empty where it would copy a chunk, else
        (TLS, which encrypts into new buffers anyway) while it is not paused."""
        pending = self._pending
        transport = self._transport
        if self._chunk_until_empty:
            self._set_limits_zero(bool(pending) or self._finishing)
        while pending and not self._paused:
            if transport is None or transport.is_closing():
                return  # connection_lost follows and drops the rest
            transport.write(pending.popleft())
        if not pending and self._chunk_until_empty:
            self._set_limits_zero(self._finishing)

    def _set_limits_zero(self, zero: bool) -> None:
        """With these limits the transport pauses us while it holds any byte
        and resumes us once it holds none. asyncio's TLS transport pauses at
        ``size >= high``, so high=0 would pause it at 0 bytes too, with no
        later call to resume it: high=1 there (its resume is at ``<= low``).
        The socket transports pause at ``size > high``."""
        transport = self._transport
        if zero == self._limits_zero or transport is None or transport.is_closing():
            # A closing TLS transport has let go of its protocol already: it
            # would fail to pause or resume it.
            return
        self._limits_zero = zero
        high, low = (self._zero_high, 0) if zero else (self._high, self._low)
        try:
            transport.set_write_buffer_limits(high=high, low=low)
        except AttributeError:
            # CPython 3.10's TLS transport once its connection is lost: it drops
            # the socket transport at once and tells its protocol a loop
            # iteration later, so it is not closing yet and has nothing to set.
            pass

    # -- flow control and the end ------------------------------------------------

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._pump()
        self._progressed()

    @property
    def idle(self) -> bool:
        """Nothing is waiting, accepted or in the transport's buffer."""
        transport = self._transport
        return not (self._waiters or self._pending or self._batch
                    or (transport is not None and transport.get_write_buffer_size()))

    async def finish(self) -> bool:
        """Send everything: the writers still waiting their turn (they called
        write() before close()), the chunks of large messages and the batch,
        until the transport's buffer is empty. False if the connection broke
        first. The wait is bounded by the kernel's dead-peer detection (see
        FramedProtocol.close)."""
        self._finishing = True
        self._set_limits_zero(True)
        while not self._broken:
            self.flush()
            self._pump()
            self._progressed()
            if self.idle:
                return True
            self._progress = self._loop.create_future()
            try:
                await self._progress
            finally:
                self._progress = None
        return False

    def abort(self) -> None:
        """Send nothing more. What was accepted goes to the kernel as far as it
        takes it at once, as with the stock comm (which writes eagerly and
        closes its socket): the batch is handed over; the rest of a large
        message in chunks is dropped, as the stock comm's unsent buffer is."""
        transport = self._transport
        if self._batch and transport is not None and not transport.is_closing():
            self.flush()
        self._break()

    def connection_lost(self) -> None:
        self._break()
        self._transport = None

    def _break(self) -> None:
        self._broken = True
        self._batch = []
        self._batch_nbytes = 0
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._pending.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(False)
        self._waiters.clear()
        progress = self._progress
        if progress is not None and not progress.done():
            progress.set_result(None)


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


def chunks(buffers: list[Buffer], size: int) -> list[Buffer]:
    """A message's buffers with every one larger than ``size`` cut into views of ``size``."""
    out: list[Buffer] = []
    for buf in buffers:
        n = len(buf)
        if n <= size:
            out.append(buf)
            continue
        view = memoryview(buf)
        out += [view[i : i + size] for i in range(0, n, size)]
    return out

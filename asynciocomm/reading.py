"""Whether a connection's transport reads: one switch, held for any of a few reasons.

* **Flow control** (:data:`FLOW`): complete messages that ``read()`` has not
  returned exceed ``read-pause``; released at or below half of that
  (:meth:`ReadSwitch.received`, :meth:`ReadSwitch.delivered`).
* **A yield to the reader** (:meth:`ReadSwitch.yield_to_reader`, :data:`YIELD`):
  a large message (a frame from the buffer pool) just completed for a reader
  that was waiting. Reading stops
  until that reader has run, for one loop iteration. The reader takes the
  message and, as a handler looping on ``read()`` does, drops the one before,
  whose pooled buffer the next large frame then reuses. Read on at once, and
  the next frame's header arrives in the same receive loop (uvloop reads again
  as long as a read fills the buffer it was given, and the last read of a
  frame does) while the reader still holds its previous message: three large
  buffers then cycle instead of two, a working set half as large again, and
  on loopback every byte of it passes through the CPU's cache twice (measured,
  16 MiB one-way on uvloop: two buffers 2.94-3.05 GiB/s, three 2.81-2.90, in a
  bare protocol; ``bench/results/README.md`` has the comm's figures).
* **The end** (:meth:`ReadSwitch.stop`): an aborted connection, or a peer that
  broke the protocol, reads nothing more, whatever else is held or released.

The transport reads while no reason holds it. One owner for the switch, so
that no release undoes another reason's pause.
"""

from __future__ import annotations

import asyncio

#: Reasons to hold reading paused (bit flags).
FLOW = 1
YIELD = 2


class ReadSwitch:
    """Pauses and resumes one transport's reading for the reasons above."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                 read_pause: int, yield_min: int | None) -> None:
        self._transport: asyncio.Transport | None = transport
        self._loop = loop
        #: Unread bytes above which reading pauses, and at or below which it
        #: resumes (half of it: the reader catches up before the next pause).
        self._pause_above = read_pause
        self._resume_at = read_pause // 2
        #: The smallest message that yields to its reader: a pooled frame's (the
        #: buffer pool's smallest buffer); None without a pool, nothing to reuse.
        self._yield_min = yield_min
        self._held = 0
        self._stopped = False
        self._yield_handle: asyncio.Handle | None = None

    def received(self, completed: int, woke_reader: bool, unread: int) -> None:
        """Bytes arrived: ``completed`` bytes of messages completed by them,
        ``woke_reader`` if one of those reached a waiting reader, and ``unread``
        bytes of messages not yet returned by ``read()`` (the one it is
        returning included)."""
        if woke_reader and self._yield_min is not None and completed >= self._yield_min:
            self.yield_to_reader()
        if unread > self._pause_above:
            self.hold(FLOW)

    def delivered(self, unread: int) -> None:
        """``read()`` returned a message; ``unread`` bytes of messages are left."""
        if unread <= self._resume_at:
            self.release(FLOW)

    def held(self, reason: int) -> bool:
        return bool(self._held & reason)

    @property
    def _paused(self) -> bool:
        """The transport is not reading: some reason holds it, or it stopped."""
        return bool(self._held) or self._stopped

    def hold(self, reason: int) -> None:
        """Pause reading for ``reason`` (no-op if it holds already)."""
        if self._held & reason:
            return
        paused = self._paused
        self._held |= reason
        if not paused and self._transport is not None:
            self._transport.pause_reading()

    def release(self, reason: int) -> None:
        """``reason`` no longer holds reading; resume if nothing else does."""
        if not self._held & reason:
            return
        self._held &= ~reason
        transport = self._transport
        if not self._paused and transport is not None and not transport.is_closing():
            transport.resume_reading()

    def yield_to_reader(self) -> None:
        """Hold reading until the loop has run the reader just woken: its
        wake-up was scheduled before this callback, so it runs first."""
        transport = self._transport
        if self._held & YIELD or self._stopped or transport is None or transport.is_closing():
            return
        self.hold(YIELD)
        self._yield_handle = self._loop.call_soon(self._end_yield)

    def _end_yield(self) -> None:
        self._yield_handle = None
        self.release(YIELD)

    def stop(self) -> None:
        """Read nothing more on this connection."""
        paused = self._paused
        self._stopped = True
        self._cancel_yield()
        if not paused and self._transport is not None:
            self._transport.pause_reading()

    def detach(self) -> None:
        """The connection is gone: drop the transport (it refers to the
        protocol that refers to this switch) and any pending yield."""
        self._cancel_yield()
        self._transport = None

    def _cancel_yield(self) -> None:
        if self._yield_handle is not None:
            self._yield_handle.cancel()
            self._yield_handle = None

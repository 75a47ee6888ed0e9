"""What the write path needs to know of each kind of transport.

asyncio's socket transport, uvloop's, and the TLS transports of both differ in
what a ``write`` costs: which copy unsent data, which write buffers by
reference, which encrypt a whole write before any of it leaves. The
:class:`TransportTraits` of a transport are worked out once per connection;
:mod:`asynciocomm.writer` acts on them. The sizes here are tuning constants,
each with its reason.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass

from asynciocomm.loops import of_uvloop

#: Chunk size for large frames, where they go in chunks (``chunk_large``).
#: On transports that copy unsent data (the plain asyncio loop before 3.12)
#: each chunk is handed over only when the buffer is empty, so at most this much
#: is ever copied; 4 MiB matches Linux's largest socket send buffer, so one
#: chunk usually leaves in one send(). Over TLS (either loop) the transport
#: encrypts each write into its memory BIO and reads the ciphertext out as one
#: bytes object, so a chunk is encrypted whole before any of it leaves; each
#: chunk also costs the TLS write path's fixed work (Python calls, a ciphertext
#: object, a flow-control pause and resume), which outweighs the cache and
#: allocator benefit of smaller chunks: measured one-way against stock TLS on
#: both loops, 4 MiB chunks move 4 MiB messages at 0.92-1.00x of it where
#: 256 KiB chunks reach 0.82x, and 16-128 MiB at 1.05-1.27x against 0.87-1.15x,
#: with 4-16 % less sender CPU from 16 MiB up (bench/results/README.md, large
#: messages).
WRITE_CHUNK = 4 * 1024 * 1024
#: Messages from this size up take that path on such transports. Below it, a
#: copy of the unsent tail costs less than waiting for the buffer to empty.
LARGE_WRITE_MIN = 256 * 1024
#: Over TLS, messages from this size up are handed to the transport as they are
#: written, never batched (see Sender._accept). Their large frame becomes TLS
#: records of its own either way; batching them only makes the transport
#: encrypt up to the high-water mark into one ciphertext buffer, and its copies
#: then run out of the CPU's caches. Measured one-way: 64 KiB and 32 KiB
#: messages gain 8-20 % unbatched, 16 KiB ones lose 5-10 % (the receiver then
#: gets many small reads), hence 32 KiB.
TLS_WRITE_THROUGH_MIN = 32 * 1024
#: No such bound (no message reaches it) on the transports that gain from
#: batching large messages: asyncio's TCP transport (64 KiB messages batched go
#: about 20 % faster) and uvloop's, which sends a batch with one writev.
NO_WRITE_THROUGH_MIN = sys.maxsize

#: How a batch of buffers is handed to a transport (see TransportTraits).
WRITEV = 0
JOIN_THEN_WRITELINES = 1
JOIN_THEN_WRITE = 2


@dataclass(frozen=True)
class TransportTraits:
    """What the write path needs to know of a transport, worked out once.

    * ``tls``: a TLS transport (either loop's).
    * ``references``: uvloop's transports write buffers by reference (writev),
      so a batch is handed over as a list without joining or copying.
    * ``mode``: how a batch goes in the fewest calls without copies. ``WRITEV``
      on uvloop's TCP transport. ``JOIN_THEN_WRITELINES`` over TLS: TLS
      transports encrypt each buffer of a ``writelines`` call in turn into one
      ciphertext buffer and send that once, but each buffer becomes at least
      one TLS record, so runs of small buffers are joined first (one ``write``
      per buffer would flush and send each one separately; uvloop's
      ``writelines`` passed every small buffer as its own record).
      ``JOIN_THEN_WRITE`` on asyncio's TCP transport, which joins a list into
      one new bytes object before Python 3.12: runs of small buffers are
      joined, large ones written as they are.
    * ``chunk_large``: large messages go in chunks: on the copying socket
      transport, and over TLS, which encrypts a whole write into one buffer
      before a byte leaves, so the peer waits for all of it and the sender's
      memory holds a second copy of the message.
    * ``chunk_until_empty``: each chunk waits for an empty buffer (asyncio's
      own socket transport copies a partial send's remainder, and before
      Python 3.12 shifts that copy on every send).
    """

    tls: bool
    references: bool

    @classmethod
    def of(cls, transport: asyncio.BaseTransport) -> TransportTraits:
        return cls(tls=transport.get_extra_info("sslcontext") is not None,
                   references=of_uvloop(transport))

    @property
    def mode(self) -> int:
        if self.tls:
            return JOIN_THEN_WRITELINES
        return WRITEV if self.references else JOIN_THEN_WRITE

    @property
    def write_through_min(self) -> int:
        """Messages from this size up are never batched."""
        return TLS_WRITE_THROUGH_MIN if self.tls else NO_WRITE_THROUGH_MIN

    @property
    def chunk_until_empty(self) -> bool:
        return not self.references and not self.tls

    @property
    def chunk_large(self) -> bool:
        return self.tls or self.chunk_until_empty


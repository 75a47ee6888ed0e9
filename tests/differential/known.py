"""The divergences from stock found so far, each as a minimal sequence.

Every case is fixed; each stays as a regression check. ``OPEN_BUGS`` names the
cases not fixed yet. While one is open, the property test leaves out what runs
into it (see ``Model.allowed``, and the ``closed()`` entries that ``runner``
masks for ``closed-on-fin-while-unread``) and its case in
``tests/test_differential.py::test_known_divergences`` is a strict xfail. Once
it is fixed, remove it from ``OPEN_BUGS``: its case must then pass, and the
property test checks that area again.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.differential.ops import (
    Abort,
    CancelWrite,
    Close,
    DoubleRead,
    Read,
    Sequence,
    Write,
    Writers,
    WritesThenClose,
)

#: Names of the known divergences not fixed yet.
OPEN_BUGS: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Known:
    """A minimal sequence that showed the divergence ``name`` on ``pairs``
    (``plain``, ``tls``), on both loops."""

    name: str
    title: str
    seq: Sequence
    pairs: tuple[str, ...] = ("plain", "tls")


KNOWN = (
    Known("closed-on-fin-while-unread",
          "closed() turns True on the peer's FIN while a message is unread",
          Sequence("plain", (Write("A", "dict"), Close("A")))),
    Known("written-before-abort", "a message written just before abort() is lost",
          Sequence("plain", (Write("B", "str"), Write("B", "dict"), Abort("B")))),
    Known("stop-in-handshake", "listener.stop() aborts a comm in its handshake",
          Sequence("stop", (Write("B", "str"), Read("A")))),
    Known("stop-in-handshake",
          "leaving `async with listen()` aborts a comm in its handshake",
          Sequence("ctx", (Write("B", "str"), Read("A")))),
    # Over TLS the 8 MiB write returns on the asyncio loop (the SSL layer
    # buffers it) and hangs on uvloop only for larger ones: shown on plain.
    Known("write-waits-for-reader",
          "write() of a large message waits for the peer's application to read",
          Sequence("plain", (Write("A", "array", 8 << 20), Read("B"))), pairs=("plain",)),
    Known("second-read", "a second concurrent read() waits forever",
          Sequence("plain", (DoubleRead("A"),))),
    Known("cancelled-large-write",
          "a large write cancelled right after it began aborts the comm and cuts it",
          Sequence("plain", (CancelWrite("A", "array", 8 << 20), Write("A", "dict")))),
    Known("cancelled-waiting-write",
          "cancelling a write queued behind a large one aborts the comm",
          Sequence("plain", (Write("A", "array", 8 << 20), CancelWrite("A", "dict")))),
    Known("writers-reordered",
          "a writer's second message overtakes another writer's, waiting behind a large one",
          Sequence("plain", (Writers("A"),))),
    Known("close-refuses-waiting-writer",
          "close() refuses a write queued behind a large one",
          Sequence("plain", (WritesThenClose("A"),))),
    Known("strided-buffer",
          "a buffer that is not C-contiguous breaks the connection",
          Sequence("plain", (Write("B", "strided", 1 << 20), Write("B", "strided", 1024),
                             Write("B", "dict")))),
    Known("offload-cycle",
          "a message offloaded after its first ToPickle is kept in a reference cycle",
          Sequence("plain", (Write("A", "large-after-to-pickle"), Read("B")))),
)

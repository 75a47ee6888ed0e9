"""The divergences from stock known today (issue 16), each as a minimal sequence.

``OPEN_BUGS`` lists the items not fixed yet. While an item is open, the property
test leaves out what runs into it (see ``Model.allowed``, and the ``closed()``
entries of item 1 that ``runner`` masks) and its case in
``tests/test_differential.py::test_known_divergences`` is a strict xfail. Once an
item is fixed, remove it from ``OPEN_BUGS``: its case must then pass, and the
property test checks that area again.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.reliability.differential.ops import Abort, Close, DoubleRead, Read, Sequence, Write

#: Issue 16 items not fixed yet.
OPEN_BUGS: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Known:
    """A minimal sequence that shows issue 16 item ``item`` on ``pairs``
    (``plain``, ``tls``), on both loops."""

    item: int
    title: str
    seq: Sequence
    pairs: tuple[str, ...] = ("plain", "tls")


KNOWN = (
    Known(1, "closed() turns True on the peer's FIN while a message is unread",
          Sequence("plain", (Write("A", "dict"), Close("A")))),
    Known(2, "a message written just before abort() is lost",
          Sequence("plain", (Write("B", "str"), Write("B", "dict"), Abort("B")))),
    Known(3, "listener.stop() aborts a comm in its handshake",
          Sequence("stop", (Write("B", "str"), Read("A")))),
    Known(3, "leaving `async with listen()` aborts a comm in its handshake",
          Sequence("ctx", (Write("B", "str"), Read("A")))),
    # Over TLS the 8 MiB write returns on the asyncio loop (the SSL layer
    # buffers it) and hangs on uvloop only for larger ones: shown on plain.
    Known(4, "write() of a large message waits for the peer's application to read",
          Sequence("plain", (Write("A", "array", 8 << 20), Read("B"))), pairs=("plain",)),
    Known(5, "a second concurrent read() waits forever",
          Sequence("plain", (DoubleRead("A"),))),
)

"""The wire framing against the stock comm's writer, on the release installed.

:mod:`asynciocomm.wire` frames a message's frames as distributed's tcp writer
does (``distributed.comm.tcp._add_frames_header``); that is what lets the
takeover of ``tcp://`` and ``tls://`` talk to processes that keep the stock comm.
A release of distributed could frame otherwise. So the first time a process makes
a comm of the takeover, :func:`checked` frames distributed's own frames of the
self-check's canonical messages both ways and compares the bytes; a difference
is logged once, as one WARNING that names the release. ``asyncio://`` peers speak
asynciocomm on both ends and are unaffected, so nothing else waits for the check.

Everything is imported when the check runs, not with this module: the backend
that imports it may be loaded while distributed itself is being imported (the
takeover's entry point of patches/0001).
"""

from __future__ import annotations

import threading
from typing import Any

#: What the encoder is given to join small frames with the header: the default
#: ``coalesce`` setting, as a comm passes it.
_COALESCE = 16 * 1024


def _wire(buffers: Any) -> bytes:
    return b"".join(bytes(memoryview(b).cast("B")) for b in buffers)


def difference() -> str | None:
    """How the encoder's framing of distributed's frames differs from the stock
    writer's, on the first canonical message where it does (None: it does not,
    or distributed has no ``_add_frames_header`` to compare with)."""
    from asynciocomm.serialization import internals, selfcheck
    from asynciocomm.wire.speedups import encode_frames

    add_header = internals.FRAMES_HEADER
    if add_header is None:
        return None
    for name, frames in selfcheck.distributed_frames():
        ours, _ = encode_frames(list(frames), _COALESCE)
        theirs, _, _ = add_header(list(frames))
        if _wire(ours) != _wire(theirs):
            return f"{name}: the framing differs from distributed's tcp writer"
    return None


_lock = threading.Lock()
_done = False


def checked() -> None:
    """Run :func:`difference` once per process and log what it finds."""
    global _done
    if _done:  # every connection after the first: no lock taken
        return
    with _lock:
        if _done:
            return
        _done = True
        try:
            found = difference()
        except Exception as e:  # a release the check cannot run on
            found = f"{type(e).__name__}: {e}"
    if found is not None:
        from asynciocomm.serialization import selfcheck

        selfcheck.report(f"the wire framing differs ({found}): the takeover of tcp:// and "
                         "tls:// cannot talk to the stock comm; asyncio:// peers are unaffected")

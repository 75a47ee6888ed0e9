"""Which codec a comm gets: the fast one where it gives distributed's frames,
distributed's own path otherwise.

The decision is made once per process, at its first comm (:func:`decided`;
not at import: asynciocomm can be imported while distributed itself is being
imported, through the takeover's entry point of patches/0001). The fast
:class:`~asynciocomm.serialization.fast.MessageCodec` is used when every private name
it needs is there (:mod:`asynciocomm.serialization.internals`), it imports, and its
self-check (:mod:`asynciocomm.serialization.selfcheck`) finds its frames equal to
distributed's; else every comm gets a :class:`~asynciocomm.serialization.stock.StockCodec`,
which (de)serializes every message with distributed's ``to_frames`` and
``from_frames``, as the stock comm does. Anything off is logged once, as one
WARNING that names the release.
"""

from __future__ import annotations

import threading
from typing import Any

from asynciocomm.log import get_logger
from asynciocomm.serialization import internals
from asynciocomm.serialization.stock import StockCodec

__all__ = ["FAST", "OFF_BECAUSE", "decide", "decided", "new_codec",
           "report"]

logger = get_logger(__name__)


def decide() -> tuple[type, str | None]:
    """The codec class to use, and why the fast one is off (None when it is on).
    Runs the self-check; changes nothing."""
    needed = sorted(name for name, paths in internals.MISSING.items()
                    if internals.CODEC in paths)
    if needed:
        return StockCodec, f"{', '.join(needed)} missing or changed"
    try:
        from asynciocomm.serialization import selfcheck
        from asynciocomm.serialization.fast import MessageCodec

        codec = selfcheck.differences(MessageCodec)
    except Exception as e:  # a release the fast path cannot even load on
        return StockCodec, f"{type(e).__name__}: {e}"
    return (StockCodec if codec is not None else MessageCodec), codec


def report(off_because: str | None) -> None:
    """Log what is off, and why, as one WARNING (nothing when all is on)."""
    parts = []
    if off_because is not None:
        parts.append(f"{internals.CODEC} is off: {off_because}")
    names: dict[str, list[str]] = {}
    for name, paths in internals.MISSING.items():
        for path in paths:
            if path != internals.CODEC:
                names.setdefault(path, []).append(name)
    parts += [f"{path} is off: {', '.join(found)} missing or changed"
              for path, found in names.items()]
    if parts:
        from asynciocomm.serialization import selfcheck

        selfcheck.report("; ".join(parts))


#: The codec class every comm gets, and why the fast one is off (None: it is
#: on); FAST is None until :func:`decided` has run.
FAST: type | None = None
OFF_BECAUSE: str | None = None
_deciding = threading.Lock()


def decided() -> tuple[type, str | None]:
    """``(FAST, OFF_BECAUSE)``, deciding and reporting them the first time."""
    global FAST, OFF_BECAUSE
    with _deciding:
        if FAST is None:
            fast, OFF_BECAUSE = decide()
            report(OFF_BECAUSE)
            FAST = fast
    return FAST, OFF_BECAUSE


def new_codec() -> Any:
    """A codec for one comm."""
    fast = FAST
    if fast is None:
        fast = decided()[0]
    return fast()

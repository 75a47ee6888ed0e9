"""Helpers of the reliability suite (the scenarios themselves live in
``tests/peers/conn.py``, ``hostile.py``, ``soak.py`` and ``procs.py`` and are
shared with the long runs, ``python -m tests.reliability``)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.certs import Certs
from tests.peers.conn import TLSSpec
from tests.peers.procs import fd_count
from tests.variants import VARIANTS, Variant

#: The variants of this suite: ours and the stock reference comms.
REL = [v for v in VARIANTS if v.name in ("asyncio", "asyncio+tls", "stock-tcp", "stock-tls")]
PLAIN = [v for v in REL if not v.tls]
TLS = [v for v in REL if v.tls]


def params(variants: list[Variant], xfail: dict[str, str] | None = None) -> list[Any]:
    """pytest params for ``variants``; ``xfail`` maps a variant name to the reason
    the stock comm fails the scenario (strict: it must keep failing)."""
    xfail = xfail or {}
    out = []
    for v in variants:
        marks = [pytest.mark.xfail(strict=True, reason=xfail[v.name])] if v.name in xfail else []
        out.append(pytest.param(v, id=v.name, marks=marks))
    return out


def security(variant: Variant, certs: Certs) -> Any:
    return certs.security() if variant.tls else None


def tls_spec(variant: Variant, certs: Certs) -> TLSSpec | None:
    return TLSSpec(ca=certs.ca, cert=certs.cert) if variant.tls else None


async def eventually(pred: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``pred`` until true or ``timeout`` (bounded); returns its last value."""
    end = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() > end:
            return pred()
        await asyncio.sleep(interval)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.fd_baseline = fd_count()

    def emit(self, record: logging.LogRecord) -> None:
        if not self.records or self.records[-1] is not record:  # root and distributed
            self.records.append(record)

    def mark_fds(self) -> None:
        """Take the descriptor baseline now (after a warm-up: an event loop opens
        some descriptors lazily, uvloop its wake-up socket pair)."""
        self.fd_baseline = fd_count()

    def text(self) -> str:
        return "\n".join(f"{r.name} {r.levelname} {r.getMessage()}" for r in self.records)


@contextlib.asynccontextmanager
async def hygiene(fds: bool = True, fd_slack: int = 0,
                  warns: bool = True) -> AsyncIterator[_Collect]:
    """Around a fault scenario: no 'Task was destroyed but it is pending', no
    ResourceWarning (unclosed transports or sockets) and, with ``fds``, no leaked
    file descriptor. Yields the collected log records."""
    handler = _Collect()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    # distributed's logging config stops its hierarchy (asynciocomm's loggers
    # included) from propagating to the root.
    logging.getLogger("distributed").addHandler(handler)
    root.setLevel(logging.INFO)
    gc.collect()
    handler.mark_fds()
    try:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            yield handler
            # let transports finish closing, then collect
            for _ in range(5):
                await asyncio.sleep(0.02)
            gc.collect()
            gc.collect()
            await asyncio.sleep(0)
        leaked_fds = 0
        if fds:
            before = handler.fd_baseline
            await eventually(lambda: fd_count() <= before + fd_slack, 10)
            leaked_fds = fd_count() - before
    finally:
        root.removeHandler(handler)
        logging.getLogger("distributed").removeHandler(handler)
        root.setLevel(old_level)
    pending = [r.getMessage() for r in handler.records
               if "was destroyed but it is pending" in r.getMessage()]
    assert not pending, pending
    rw = [str(w.message) for w in rec if issubclass(w.category, ResourceWarning)]
    if warns:
        assert not rw, rw
    if fds:
        assert leaked_fds <= fd_slack, f"{leaked_fds} file descriptors leaked"

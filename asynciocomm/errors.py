"""Errors, and the one boundary where transport errors become distributed's.

Everything below the comm (the codec, the protocol, sockets, ssl) raises or records
its own exceptions. :func:`translate` is the single place that turns them into
``CommClosedError`` / ``FatalCommClosedError``, the only errors distributed expects
from a comm: a fatal one stops distributed's connect retries (a TLS peer we do not
trust will not start trusting us on the next attempt).
"""

from __future__ import annotations

import ssl

from distributed.comm.core import CommClosedError, FatalCommClosedError

from asynciocomm.wire.errors import ProtocolError

__all__ = ["ProtocolError", "detached", "is_fatal", "translate"]


_TLS_HINT = (
    "Check your security settings. "
    "More info at https://distributed.dask.org/en/latest/tls.html"
)


def is_fatal(exc: BaseException | None) -> bool:
    """TLS trust failures: retrying cannot help."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return True
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or ""
        return any(
            tag in reason
            for tag in ("UNKNOWN_CA", "CERTIFICATE_VERIFY_FAILED", "BAD_CERTIFICATE",
                        "CERTIFICATE_UNKNOWN", "CERTIFICATE_EXPIRED", "WRONG_VERSION")
        )  # fmt: skip
    return False


def detached(exc: BaseException) -> BaseException:
    """``exc`` without its traceback and context, to be kept as the reason a
    connection ended. Its traceback's frames include the one that caught it,
    whose ``self`` is the protocol that keeps it: a reference cycle, which
    would hold the connection's buffers until the garbage collector runs (and
    memoryviews with their exporter in one cycle are what CPython's collector
    cannot clear). The reason is in the exception's type and message."""
    exc.__traceback__ = None
    exc.__context__ = None
    return exc


def translate(where: object, exc: BaseException | None) -> CommClosedError:
    """The distributed error to raise for ``exc`` (None: the peer closed cleanly)."""
    if isinstance(exc, CommClosedError):
        return exc
    if exc is None:
        return CommClosedError(f"in {where}: Stream is closed")
    if isinstance(exc, ProtocolError):
        err = CommClosedError(f"in {where}: protocol error, connection aborted: {exc}")
    elif is_fatal(exc):
        err = FatalCommClosedError(
            f"in {where}: TLS failure: {type(exc).__name__}: {exc}. {_TLS_HINT}"
        )
    else:
        err = CommClosedError(f"in {where}: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err

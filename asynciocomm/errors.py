"""Errors, and the one boundary where transport errors become distributed's.

Everything below the comm (the codec, the protocol, sockets, ssl) raises or records
its own exceptions. This module is the single place that turns them into
``CommClosedError`` / ``FatalCommClosedError``, the only errors distributed expects
from a comm: :func:`translate` for a connection that ended, :func:`connect_failed`
for one that never began, :func:`closed_here` and :func:`truncated` for the two
the comm itself finds. A fatal one stops distributed's connect retries (a TLS
peer we do not trust will not start trusting us on the next attempt).
"""

from __future__ import annotations

import ssl

from distributed.comm.core import CommClosedError, FatalCommClosedError

from asynciocomm.wire.errors import ProtocolError

__all__ = ["ProtocolError", "closed_here", "connect_failed", "detached", "is_fatal",
           "translate", "truncated"]


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


def connect_failed(where: object, exc: OSError) -> CommClosedError:
    """The distributed error for a connection attempt that failed with ``exc``.
    Any TLS failure while connecting is fatal, as with the stock comm: retrying
    will not make the peer speak TLS or trust us."""
    if isinstance(exc, ssl.SSLError):
        err: CommClosedError = FatalCommClosedError(
            f"TLS handshake with {where} failed: {type(exc).__name__}: {exc}")
        err.__cause__ = exc
        return err
    return translate(f"connect to {where}", exc)


def closed_here(where: object) -> CommClosedError:
    """A read or write on a comm closed or aborted on this side, worded as stock's."""
    return CommClosedError(f"in {where}: comm was closed locally")


def truncated(where: object) -> CommClosedError:
    """A message whose frames ended early (``EOFError`` of its deserialization)."""
    return CommClosedError(f"in {where}: aborted stream on truncated data")

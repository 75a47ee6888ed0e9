"""The one boundary where transport errors become distributed's (asynciocomm.errors)."""

from __future__ import annotations

import ssl

from distributed.comm.core import CommClosedError, FatalCommClosedError

from asynciocomm import errors


def test_any_tls_failure_while_connecting_is_fatal() -> None:
    exc = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    err = errors.connect_failed("asyncio+tls://127.0.0.1:1", exc)
    assert type(err) is FatalCommClosedError and err.__cause__ is exc
    assert "TLS handshake with asyncio+tls://127.0.0.1:1 failed: SSLError" in str(err)


def test_a_refused_connection_may_be_retried() -> None:
    exc = ConnectionRefusedError(111, "Connection refused")
    err = errors.connect_failed("asyncio://127.0.0.1:1", exc)
    assert type(err) is CommClosedError and err.__cause__ is exc
    assert str(err).startswith("in connect to asyncio://127.0.0.1:1: ConnectionRefusedError")


def test_an_untrusted_peer_ends_a_connection_fatally_and_a_reset_does_not() -> None:
    untrusted = ssl.SSLCertVerificationError(1, "certificate verify failed")
    assert type(errors.translate("c", untrusted)) is FatalCommClosedError
    assert type(errors.translate("c", ConnectionResetError())) is CommClosedError
    assert "Stream is closed" in str(errors.translate("c", None))
    assert "protocol error" in str(errors.translate("c", errors.ProtocolError("bad header")))


def test_the_comms_own_errors_say_where() -> None:
    assert str(errors.closed_here("<comm>")) == "in <comm>: comm was closed locally"
    assert str(errors.truncated("<comm>")) == "in <comm>: aborted stream on truncated data"
    assert not isinstance(errors.closed_here("c"), FatalCommClosedError)

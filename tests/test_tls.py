"""TLS: mutual authentication, trust failures, scheme mismatches, encryption policy.

Certificates are generated per session (tests/certs.py). Every connect gets a
``timeout=`` far above the bound of :func:`fails_promptly`, so a failure that only
shows up as a connect time-out is caught as such, not mistaken for a clean refusal.
"""

from __future__ import annotations

import asyncio
import ssl

import pytest
from distributed.comm import listen
from distributed.comm.core import CommClosedError, FatalCommClosedError

from tests.helpers_net import WAIT, fails_promptly, plain_connect, roundtrip
from tests.variants import VARIANTS, serve

TLS_VARIANTS = [pytest.param(v, id=v.name) for v in VARIANTS if v.ours and v.tls]
ASYNCIO = next(v for v in VARIANTS if v.name == "asyncio")
ASYNCIO_TLS = next(v for v in VARIANTS if v.name == "asyncio+tls")

LONG = 4 * WAIT  # connect timeout= that a prompt failure must not depend on


@pytest.fixture(params=TLS_VARIANTS)
def tls_variant(request):
    with request.param.active():
        yield request.param


def client_args(certs, **kw):
    return certs.security(**kw).get_connection_args("client")


async def test_mutual_tls_both_sides_see_peer_certificate(tls_variant, certs) -> None:
    server_info: asyncio.Future = asyncio.get_running_loop().create_future()

    async def handler(comm) -> None:
        server_info.set_result(dict(comm.extra_info))
        await comm.close()

    async with serve(tls_variant, certs, handler) as listener:
        comm = await plain_connect(listener.contact_address, **client_args(certs))
        try:
            info = await asyncio.wait_for(server_info, WAIT)
            # The server required and verified the client's certificate.
            assert dict(x[0] for x in info["peercert"]["subject"])["commonName"] == (
                "asynciocomm test"
            )
            assert info["cipher"][1].startswith("TLS")
            cinfo = comm.extra_info
            assert dict(x[0] for x in cinfo["peercert"]["subject"])["commonName"]
            name, proto, bits = cinfo["cipher"]
            assert name and proto.startswith("TLS") and bits >= 128
        finally:
            await comm.close()


async def test_client_without_certificate_is_refused(tls_variant, certs) -> None:
    async with serve(tls_variant, certs) as listener:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=certs.ca)
        ctx.check_hostname = False  # the client trusts the server, but has no cert
        exc = await fails_promptly(
            plain_connect(listener.contact_address, timeout=LONG, ssl_context=ctx)
        )
        assert isinstance(exc, CommClosedError), repr(exc)
        await roundtrip(tls_variant, certs, listener.contact_address)


async def test_wrong_ca_on_client_is_fatal_and_prompt(tls_variant, certs) -> None:
    """The client does not trust the server's CA: FatalCommClosedError, no retries."""
    async with serve(tls_variant, certs) as listener:
        args = client_args(certs, ca=certs.other_ca, cert=certs.other_cert)
        exc = await fails_promptly(plain_connect(listener.contact_address, timeout=LONG, **args))
        assert isinstance(exc, FatalCommClosedError), repr(exc)
        assert "TLS" in str(exc) or "certificate" in str(exc).lower()
        await roundtrip(tls_variant, certs, listener.contact_address)


CLIENT_CERT_REJECTED_BUG = (
    "Known limitation: when a server rejects the client's certificate (TLS 1.3: "
    "after the client's handshake completed), the client sees the connection reset "
    "instead of the TLS alert: asyncio's SSL layer (and uvloop's copy of it) aborts "
    "a failed server handshake without flushing the alert, and a stock server's "
    "alert can be lost to the reset that follows it. The error is still prompt "
    "(CommClosedError from the first read, after distributed's connect retries), "
    "but not FatalCommClosedError as with the stock tls comm"
)


async def test_rejected_client_certificate_fails_promptly(tls_variant, certs) -> None:
    """Whatever the error class, a client whose certificate the server rejects gets
    an error at once, and the listener keeps serving."""
    async with serve(tls_variant, certs) as listener:
        for cert in (certs.other_cert, certs.expired):
            args = client_args(certs, cert=cert)
            exc = await fails_promptly(
                plain_connect(listener.contact_address, timeout=LONG, **args)
            )
            assert isinstance(exc, CommClosedError), repr(exc)
        await roundtrip(tls_variant, certs, listener.contact_address)


@pytest.mark.xfail(strict=True, reason=CLIENT_CERT_REJECTED_BUG)
async def test_wrong_ca_on_server_is_fatal_and_prompt(tls_variant, certs) -> None:
    """The client trusts the server, but presents a certificate of an unrelated CA."""
    async with serve(tls_variant, certs) as listener:
        args = client_args(certs, cert=certs.other_cert)
        exc = await fails_promptly(plain_connect(listener.contact_address, timeout=LONG, **args))
        assert isinstance(exc, FatalCommClosedError), repr(exc)
        await roundtrip(tls_variant, certs, listener.contact_address)


@pytest.mark.xfail(
    strict=True,
    reason="Known limitation (asyncio's SSL layer): asynciocomm's TLS listener drops "
    "a connection whose client certificate it rejects without the TLS alert (a raw "
    "ssl client reads a clean EOF, b''), so the stock tls client gets "
    "CommClosedError('Stream is closed') instead of "
    "FatalCommClosedError(TLSV1_ALERT_UNKNOWN_CA), which it gets from a stock listener",
)
async def test_stock_client_with_untrusted_cert_against_our_listener_is_fatal(certs) -> None:
    takeover = next(v for v in VARIANTS if v.name == "takeover-tls")
    with takeover.active():
        listener = listen(
            "tls://127.0.0.1:0", lambda comm: comm.close(), **takeover.listen_args(certs)
        )
    await listener.start()
    try:
        assert type(listener).__module__.startswith("asynciocomm")
        args = client_args(certs, cert=certs.other_cert)  # stock tls connector
        exc = await fails_promptly(plain_connect(listener.contact_address, timeout=LONG, **args))
        assert isinstance(exc, FatalCommClosedError), repr(exc)
    finally:
        listener.stop()


async def test_expired_server_certificate_is_a_clear_fatal_error(tls_variant, certs) -> None:
    listener = listen(
        f"{tls_variant.scheme}://127.0.0.1:0",
        lambda comm: comm.close(),
        **certs.security(cert=certs.expired).get_listen_args("scheduler"),
    )
    await listener.start()
    try:
        exc = await fails_promptly(
            plain_connect(listener.contact_address, timeout=LONG, **client_args(certs))
        )
        assert isinstance(exc, FatalCommClosedError), repr(exc)
        assert "expired" in str(exc).lower(), str(exc)
    finally:
        listener.stop()


@pytest.mark.xfail(strict=True, reason=CLIENT_CERT_REJECTED_BUG)
async def test_expired_client_certificate_is_a_clear_fatal_error(tls_variant, certs) -> None:
    async with serve(tls_variant, certs) as listener:
        args = client_args(certs, cert=certs.expired)
        exc = await fails_promptly(plain_connect(listener.contact_address, timeout=LONG, **args))
        assert isinstance(exc, FatalCommClosedError), repr(exc)
        assert "expired" in str(exc).lower(), str(exc)
        await roundtrip(tls_variant, certs, listener.contact_address)


async def test_plain_client_against_tls_listener(certs) -> None:
    async with serve(ASYNCIO_TLS, certs) as listener:
        plain_address = listener.contact_address.replace("asyncio+tls://", "asyncio://")
        exc = await fails_promptly(plain_connect(plain_address, timeout=LONG))
        assert isinstance(exc, (CommClosedError, OSError)), repr(exc)
        await roundtrip(ASYNCIO_TLS, certs, listener.contact_address)


async def test_tls_client_against_plain_listener(certs) -> None:
    async with serve(ASYNCIO, None) as listener:
        tls_address = listener.contact_address.replace("asyncio://", "asyncio+tls://")
        exc = await fails_promptly(
            plain_connect(tls_address, timeout=LONG, **client_args(certs)), bound=5
        )
        # The listener answers the ClientHello with a TLS alert: final, no retries.
        assert isinstance(exc, FatalCommClosedError), repr(exc)


async def test_plain_listener_survives_tls_client(certs, caplog) -> None:
    async with serve(ASYNCIO, None) as listener:
        tls_address = listener.contact_address.replace("asyncio://", "asyncio+tls://")
        with pytest.raises(OSError):
            await asyncio.wait_for(
                plain_connect(tls_address, timeout=2, **client_args(certs)), WAIT
            )
        # The listener refused the ClientHello as a malformed frame header.
        assert "malformed header" in caplog.text
        await roundtrip(ASYNCIO, None, listener.contact_address)


async def test_require_encryption_refuses_plain_listen(certs) -> None:
    with pytest.raises(RuntimeError, match="encryption required"):
        listen("asyncio://127.0.0.1:0", lambda comm: None, require_encryption=True)
    # The same through a Security object, as a scheduler would pass it.
    args = certs.security(require_encryption=True).get_listen_args("scheduler")
    with pytest.raises(RuntimeError, match="asyncio://127.0.0.1:0"):
        listen("asyncio://127.0.0.1:0", lambda comm: None, **args)


async def test_require_encryption_refuses_plain_connect(certs) -> None:
    async with serve(ASYNCIO, None) as listener:
        args = certs.security(require_encryption=True).get_connection_args("client")
        with pytest.raises(RuntimeError, match="encryption required"):
            await asyncio.wait_for(
                plain_connect(listener.contact_address, timeout=LONG, **args), WAIT
            )
        with pytest.raises(RuntimeError, match="encryption required"):
            await asyncio.wait_for(
                plain_connect(listener.contact_address, timeout=LONG, require_encryption=True),
                WAIT,
            )
        # A TLS scheme is fine under the same policy.
    async with serve(ASYNCIO_TLS, certs) as listener:
        await roundtrip(ASYNCIO_TLS, certs, listener.contact_address)


async def test_tls_scheme_without_context_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="ssl_context"):
        listen("asyncio+tls://127.0.0.1:0", lambda comm: None)


async def test_our_client_with_untrusted_cert_against_stock_listener_is_fatal(certs) -> None:
    """A stock tls listener rejects our client's certificate: it sends the
    TLS alert and closes with our handshake message unread. The client reads the
    alert (not only the reset that follows it) and fails with a fatal error."""
    stock = next(v for v in VARIANTS if v.name == "stock-tls")
    listener = listen("tls://127.0.0.1:0", lambda comm: comm.close(), **stock.listen_args(certs))
    await listener.start()
    try:
        assert type(listener).__module__ == "distributed.comm.tcp"
        takeover = next(v for v in VARIANTS if v.name == "takeover-tls")
        with takeover.active():
            args = client_args(certs, cert=certs.other_cert)
            exc = await fails_promptly(
                plain_connect(listener.contact_address, timeout=LONG, **args)
            )
        assert isinstance(exc, FatalCommClosedError), repr(exc)
    finally:
        listener.stop()

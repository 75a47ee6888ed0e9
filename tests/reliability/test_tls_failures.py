"""TLS trust failures and scheme mismatches fail promptly, with a clear error,
on ours and on the stock tls comm; ``require_encryption`` refuses plain schemes.
The connect timeout is 20 s here and every failure must arrive within 5 s."""

from __future__ import annotations

import asyncio
import ssl

import dask
import pytest
from distributed.comm import connect
from distributed.comm.core import CommClosedError, FatalCommClosedError
from distributed.security import Security

from tests.peers.conn import connect_args, roundtrip, serve
from tests.peers.soak import soak_handler
from tests.reliability._util import TLS, hygiene, params

TIMEOUT = 20  # the connect timeout
PROMPT = 5.0  # what "promptly" means


def _other(variant_name: str) -> str:
    return {"asyncio+tls": "asyncio", "stock-tls": "tcp"}[variant_name]


async def _fails(aw) -> tuple[BaseException, float]:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    try:
        comm = await asyncio.wait_for(aw, PROMPT)
    except asyncio.TimeoutError as e:
        raise AssertionError(f"no failure within {PROMPT} s") from e
    except Exception as e:  # noqa: BLE001
        assert "Timed out trying to connect" not in str(e), e
        return e, loop.time() - t0
    comm.abort()
    raise AssertionError("connected although it must not")


def _client_sec(certs, **kw) -> Security:
    return certs.security(**kw)


@pytest.mark.parametrize("variant", params(TLS))
@pytest.mark.parametrize("case", ["wrong-ca", "expired-cert", "wrong-hostname"])
async def test_tls_trust_failure_is_prompt(variant, case, certs) -> None:
    server_sec = certs.security(cert=certs.expired) if case == "expired-cert" else certs.security()
    with dask.config.set({"distributed.comm.timeouts.connect": f"{TIMEOUT}s"}):
        async with hygiene(fds=False):
            async with serve(variant.scheme, soak_handler, server_sec) as listener:
                addr = listener.contact_address
                if case == "wrong-ca":
                    kw = connect_args(certs.security(ca=certs.other_ca))
                elif case == "expired-cert":
                    kw = connect_args(certs.security())
                else:
                    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=certs.ca)
                    ctx.load_cert_chain(certs.cert)
                    ctx.check_hostname = True
                    kw = {"ssl_context": ctx, "server_hostname": "wrong.example.org",
                          "require_encryption": True}
                exc, took = await _fails(connect(addr, timeout=TIMEOUT, **kw))
                print(f"{case}: {type(exc).__name__} after {took:.2f} s: {exc}")
                assert isinstance(exc, CommClosedError), repr(exc)
                text = f"{exc} {exc.__cause__}"
                assert any(w in text for w in ("CERTIFICATE", "certificate", "SSL", "TLS",
                                               "hostname")), text
                # and the listener still serves good clients
                if case != "expired-cert":
                    await roundtrip(addr, connect_args(certs.security()))


# Regression: the plain listener used to reset the connection, and the reset made
# the client's kernel drop the bytes that tell its TLS layer it reached a plain
# listener, so connect() retried until timeouts.connect. It now answers a TLS
# ClientHello with a TLS alert and closes with a FIN.
@pytest.mark.parametrize("variant", params(TLS))
async def test_tls_client_to_plain_listener_is_prompt(variant, certs) -> None:
    plain = _other(variant.name)
    with dask.config.set({"distributed.comm.timeouts.connect": f"{TIMEOUT}s"}):
        async with hygiene(fds=False):
            async with serve(plain, soak_handler, None) as listener:
                host_port = listener.contact_address.split("://")[1]
                exc, took = await _fails(connect(f"{variant.scheme}://{host_port}",
                                                 timeout=TIMEOUT, **connect_args(certs.security())))
                print(f"tls->plain: {type(exc).__name__} after {took:.2f} s: {exc}")
                if variant.ours:
                    assert isinstance(exc, FatalCommClosedError), repr(exc)
                # stock tls on uvloop: ValueError('IOStream is not idle; cannot convert
                # to SSL') from tornado instead of a CommClosedError (finding)
                await roundtrip(listener.contact_address, {})


@pytest.mark.parametrize("variant", params(TLS))
async def test_plain_client_to_tls_listener_is_prompt(variant, certs) -> None:
    plain = _other(variant.name)
    with dask.config.set({"distributed.comm.timeouts.connect": f"{TIMEOUT}s"}):
        # stock tcp client: intermittent unclosed-socket ResourceWarning here (finding)
        async with hygiene(fds=False, warns=variant.ours):
            async with serve(variant.scheme, soak_handler, certs.security()) as listener:
                host_port = listener.contact_address.split("://")[1]
                exc, took = await _fails(connect(f"{plain}://{host_port}", timeout=TIMEOUT))
                print(f"plain->tls: {type(exc).__name__} after {took:.2f} s: {exc}")
                assert isinstance(exc, CommClosedError), repr(exc)


@pytest.mark.parametrize("variant", params(TLS))
async def test_plain_client_to_tls_listener_fails_within_connect_timeout(variant, certs) -> None:
    """What the plain->TLS case does get: a failure bounded by the connect timeout
    (3 s here) on ours; the stock tls listener never drops the peer, so there the
    client's own connect timeout ends it."""
    plain = _other(variant.name)
    with dask.config.set({"distributed.comm.timeouts.connect": "3s"}):
        async with hygiene(fds=False):
            async with serve(variant.scheme, soak_handler, certs.security()) as listener:
                host_port = listener.contact_address.split("://")[1]
                try:
                    comm = await asyncio.wait_for(connect(f"{plain}://{host_port}"), 12)
                except (OSError, asyncio.TimeoutError) as e:
                    print(f"plain->tls: {type(e).__name__}: {e}")
                else:
                    comm.abort()
                    raise AssertionError("a plain client completed a handshake with TLS")
                await roundtrip(listener.contact_address, connect_args(certs.security()))


@pytest.mark.parametrize("variant", params(TLS))
async def test_require_encryption_refuses_plain_scheme(variant, certs) -> None:
    plain = _other(variant.name)
    sec = certs.security(require_encryption=True)
    with pytest.raises(RuntimeError, match="encrypt"):
        await asyncio.wait_for(
            connect(f"{plain}://127.0.0.1:1", timeout=2, **connect_args(sec)), PROMPT)
    from distributed.comm import listen

    with pytest.raises(RuntimeError, match="encrypt"):
        listen(f"{plain}://127.0.0.1:0", soak_handler, **sec.get_listen_args("scheduler"))

"""Socket options on both ends of a comm, against distributed.comm.timeouts.tcp and
against what the stock tcp comm sets under the same configuration."""

from __future__ import annotations

import asyncio
import os
import socket
import sys

import dask
import pytest

from asynciocomm.sockets import binding
from asynciocomm.sockets.sockopts import reuse_address
from tests.helpers_net import WAIT
from tests.variants import OURS, connect_to, raw_socket, serve
from tests.variants import VARIANTS as ALL

VARIANTS = [pytest.param(v, id=v.name) for v in OURS]
STOCK_TCP = next(v for v in ALL if v.name == "stock-tcp")
TCP_USER_TIMEOUT = getattr(socket, "TCP_USER_TIMEOUT", 18)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux options")


@pytest.fixture(params=VARIANTS)
def variant(request):
    return request.param


def options(sock) -> dict[str, int]:
    get = sock.getsockopt
    return {
        "nodelay": bool(get(socket.IPPROTO_TCP, socket.TCP_NODELAY)),
        "keepalive": bool(get(socket.SOL_SOCKET, socket.SO_KEEPALIVE)),
        "keepidle": get(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
        "keepintvl": get(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
        "keepcnt": get(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
        "user_timeout": get(socket.IPPROTO_TCP, TCP_USER_TIMEOUT),
    }


async def both_ends(variant, certs) -> tuple[dict, dict]:
    server: asyncio.Future = asyncio.get_running_loop().create_future()

    async def handler(comm) -> None:
        assert type(comm).__module__.startswith(
            "asynciocomm" if variant.ours else "distributed"
        ), type(comm)
        server.set_result(options(raw_socket(comm)))
        await comm.close()

    async with serve(variant, certs, handler) as listener:
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        try:
            assert type(comm).__module__.startswith(
                "asynciocomm" if variant.ours else "distributed"
            ), type(comm)
            client = options(raw_socket(comm))
            return client, await asyncio.wait_for(server, WAIT)
        finally:
            await comm.close()


@linux_only
@pytest.mark.parametrize("tcp_timeout", [30, 61, 300])
async def test_socket_options_follow_tcp_timeout(variant, certs, tcp_timeout) -> None:
    with dask.config.set({"distributed.comm.timeouts.tcp": f"{tcp_timeout}s"}):
        stock_client, stock_server = await both_ends(STOCK_TCP, None)
        with variant.active():
            client, server = await both_ends(variant, certs)

    for opts in (client, server):
        assert opts["nodelay"] and opts["keepalive"]
        assert opts["keepcnt"] == 10
        assert opts["keepidle"] + 10 * opts["keepintvl"] == tcp_timeout
        assert opts["keepidle"] > 0 and opts["keepintvl"] > 0
        assert opts["user_timeout"] == tcp_timeout * 1000
    # The stock comm derives the same values from the same setting.
    assert client == stock_client, (client, stock_client)
    assert server == stock_server, (server, stock_server)


@pytest.mark.parametrize(("os_name", "expected"), [("posix", True), ("nt", False)])
def test_reuse_address_on_posix_only(os_name, expected) -> None:
    """SO_REUSEADDR: on Windows it would let a second listener take a port in
    use, so it is set on POSIX only, as tornado and asyncio decide."""
    assert reuse_address(os_name) is expected


@pytest.mark.parametrize("os_name", ["posix", "nt"])
def test_listening_sockets_follow_the_decision(monkeypatch, os_name) -> None:
    monkeypatch.setattr(binding, "reuse_address", lambda: reuse_address(os_name))
    sockets = binding.bind_sockets("127.0.0.1", 0, 16)
    try:
        got = sockets[0].getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
    finally:
        for s in sockets:
            s.close()
    assert bool(got) is (os_name != "nt")


def _reuse_flags(listener) -> set[int]:
    """SO_REUSEADDR of every listening socket of a started listener (ours or stock)."""
    tcp_server = getattr(listener, "tcp_server", None)
    if tcp_server is not None:
        socks = list(tcp_server._sockets.values())
    elif listener._acceptor is not None:
        socks = list(listener._acceptor._sockets)
    else:
        socks = [sock for server in listener._servers for sock in server.sockets]
    assert socks
    return {bool(s.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)) for s in socks}


@pytest.mark.skipif(os.name == "nt", reason="POSIX")
async def test_listening_sockets_reuse_address_as_stock(variant, certs) -> None:
    async with serve(STOCK_TCP, None, host="") as stock:
        expected = _reuse_flags(stock)
    with variant.active():
        async with serve(variant, certs, host="") as ours:
            got = _reuse_flags(ours)
    assert got == expected == {True}

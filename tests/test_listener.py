"""Listener and address handling: dual-stack wildcard port, IPv6, contact
addresses, the listen backlog, stop() during handshakes, backend address
functions."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import dask
import pytest
from distributed.comm import addressing, listen
from distributed.comm.core import CommClosedError
from distributed.comm.registry import get_backend
from distributed.utils import get_ip

from tests.helpers_net import WAIT, RawPeer, roundtrip
from tests.variants import OURS, OWN, connect_to, serve, variant_fixture

ASYNCIO = next(v for v in OURS if v.name == "asyncio")
variant = variant_fixture(OWN)


def _listening(port: int) -> list[list[str]]:
    """``ss -ltnH`` rows (State, Recv-Q, Send-Q, Local, Peer) listening on ``port``."""
    ss = shutil.which("ss") or "/usr/bin/ss"
    out = subprocess.run(
        [ss, "-ltnH", f"sport = :{port}"], capture_output=True, text=True, timeout=WAIT,
        check=True,
    ).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


async def test_wildcard_port_zero_is_one_port_for_both_families(variant, certs) -> None:
    async with serve(variant, certs, host="") as listener:
        port = listener.get_host_port()[1]
        assert listener.listen_address == f"{variant.scheme}://0.0.0.0:{port}"
        rows = _listening(port)
        local = sorted(r[3] for r in rows)
        assert local == sorted([f"0.0.0.0:{port}", f"[::]:{port}"]), rows
        await roundtrip(variant, certs, f"{variant.scheme}://127.0.0.1:{port}")
        await roundtrip(variant, certs, f"{variant.scheme}://[::1]:{port}")


async def test_ipv6_loopback(variant, certs) -> None:
    peers: asyncio.Queue = asyncio.Queue()

    async def handler(comm) -> None:
        peers.put_nowait((comm.local_address, comm.peer_address))
        await comm.write(await comm.read())
        await comm.close()

    async with serve(variant, certs, handler, host="[::1]") as listener:
        port = listener.get_host_port()[1]
        assert listener.listen_address == f"{variant.scheme}://[::1]:{port}"
        assert listener.contact_address == listener.listen_address
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        try:
            await comm.write({"x": 1})
            assert await asyncio.wait_for(comm.read(), WAIT) == {"x": 1}
            local, peer = await asyncio.wait_for(peers.get(), WAIT)
            assert local == listener.listen_address
            assert peer == comm.local_address
            assert comm.local_address.startswith(f"{variant.scheme}://[::1]:")
        finally:
            await comm.close()


async def test_contact_address_uses_default_host(variant, certs) -> None:
    async with serve(variant, certs, host="", default_host="localhost") as listener:
        port = listener.get_host_port()[1]
        assert listener.contact_address == f"{variant.scheme}://localhost:{port}"
        await roundtrip(variant, certs, listener.contact_address)
    async with serve(variant, certs, host="0.0.0.0") as listener:
        port = listener.get_host_port()[1]
        assert listener.contact_address == f"{variant.scheme}://{get_ip()}:{port}"


@pytest.mark.parametrize("backlog", [123, 2048])
async def test_listen_backlog_follows_config(backlog) -> None:
    with open("/proc/sys/net/core/somaxconn") as f:
        somaxconn = int(f.read())
    with dask.config.set({"distributed.comm.socket-backlog": backlog}):
        async with serve(ASYNCIO, None, host="") as listener:
            rows = _listening(listener.get_host_port()[1])
    assert len(rows) == 2
    for row in rows:
        assert int(row[2]) == min(backlog, somaxconn), row  # Send-Q: the backlog


async def test_stop_aborts_comms_in_handshake(variant, certs) -> None:
    """A client that connected but is still in distributed's handshake when the
    listener stops gets an error, not a hang."""
    async with serve(variant, certs) as listener:
        connector = get_backend(variant.scheme).get_connector()
        _, loc = addressing.parse_address(listener.contact_address)
        comm = await asyncio.wait_for(
            connector.connect(loc, **variant.connect_args(certs)), WAIT
        )
        try:
            theirs = await asyncio.wait_for(comm.read(), WAIT)  # the listener's half
            assert "pickle-protocol" in theirs
            listener.stop()  # we never send ours
            with pytest.raises(CommClosedError):
                await asyncio.wait_for(comm.read(), WAIT)
        finally:
            comm.abort()
        # No new connection is accepted after stop().
        with pytest.raises(OSError):
            await asyncio.wait_for(
                connect_to(variant, certs, listener.contact_address, timeout=1), WAIT
            )


async def test_stop_aborts_raw_peer_in_handshake() -> None:
    async with serve(ASYNCIO, None) as listener:
        peer = RawPeer.connect(listener.contact_address)
        try:
            await peer.read_msg()
            listener.stop()
            assert await peer.wait_closed_by_peer() in ("eof", "reset")
        finally:
            peer.close()


@pytest.mark.parametrize("scheme", ["asyncio", "asyncio+tls"])
def test_backend_address_functions_match_tcp(scheme) -> None:
    """distributed.comm.addressing on our schemes gives what it gives for tcp://."""
    locs = ["127.0.0.1:8786", "localhost:8786", "[::1]:8786", "192.0.2.7:1"]
    for loc in locs:
        ours, stock = f"{scheme}://{loc}", f"tcp://{loc}"
        assert addressing.get_address_host_port(ours) == addressing.get_address_host_port(stock)
        assert addressing.get_address_host(ours) == addressing.get_address_host(stock)
        assert addressing.resolve_address(ours) == addressing.resolve_address(stock).replace(
            "tcp://", f"{scheme}://"
        )
    assert addressing.resolve_address(f"{scheme}://localhost:80") in (
        f"{scheme}://127.0.0.1:80",
        f"{scheme}://[::1]:80",
    )
    assert addressing.get_address_host_port(f"{scheme}://[::1]:8786") == ("::1", 8786)
    assert addressing.get_address_host(f"{scheme}://[::1]:8786") == "::1"
    assert addressing.get_local_address_for(f"{scheme}://127.0.0.1:80") == (
        f"{scheme}://127.0.0.1"
    )
    assert addressing.get_local_address_for(f"{scheme}://[::1]:80") == f"{scheme}://[::1]"
    assert addressing.get_local_address_for(f"{scheme}://127.0.0.1:80") == (
        addressing.get_local_address_for("tcp://127.0.0.1:80").replace("tcp://", f"{scheme}://")
    )


def test_listen_on_invalid_address_is_a_clear_error() -> None:
    with pytest.raises(ValueError):
        listen("asyncio://127.0.0.1:notaport", lambda comm: None)

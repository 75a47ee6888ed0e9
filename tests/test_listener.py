"""Listener and address handling: dual-stack wildcard port, IPv6, contact
addresses, the listen backlog, stop() during handshakes, binding without IPv6
(also through the real ``dask scheduler``), backend address functions."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import socket
import subprocess
import sys
import textwrap

import dask
import pytest
from distributed.comm import addressing, listen
from distributed.comm.registry import get_backend
from distributed.core import Server, rpc
from distributed.utils import get_ip

from asynciocomm.sockets.binding import bind_sockets, candidates
from tests.conformance.listening import NO_IPV6_PRELUDE, no_ipv6
from tests.conftest import loop_env
from tests.helpers_net import WAIT, RawPeer, roundtrip
from tests.peers.conn import echo
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


async def test_stop_leaves_comms_in_handshake_and_accepts_no_more(variant, certs) -> None:
    """stop() stops accepting and nothing else (the Listener contract): a client
    in distributed's handshake finishes it afterwards and is served."""
    handed: asyncio.Queue = asyncio.Queue()
    async with serve(variant, certs, handed.put) as listener:
        connector = get_backend(variant.scheme).get_connector()
        address = listener.contact_address
        _, loc = addressing.parse_address(address)
        comm = await asyncio.wait_for(
            connector.connect(loc, **variant.connect_args(certs)), WAIT
        )
        try:
            theirs = await asyncio.wait_for(comm.read(), WAIT)  # the listener's half
            assert "pickle-protocol" in theirs
            listener.stop()
            await comm.write(comm.handshake_info())  # ours, after stop()
            server = await asyncio.wait_for(handed.get(), WAIT)
            await server.write({"op": "served"})
            assert await asyncio.wait_for(comm.read(), WAIT) == {"op": "served"}
            server.abort()
        finally:
            comm.abort()
        # No new connection is accepted after stop().
        with pytest.raises(OSError):
            await asyncio.wait_for(
                connect_to(variant, certs, address, timeout=1), WAIT
            )


async def test_server_stop_aborts_raw_peer_in_handshake() -> None:
    """distributed.core.Server.stop() aborts what is still in its handshake."""
    server = Server({})
    await server.listen("asyncio://127.0.0.1:0")
    peer = RawPeer.connect(server.address)
    try:
        await peer.read_msg()
        server.stop()
        assert await peer.wait_closed_by_peer() in ("eof", "reset")
    finally:
        peer.close()
        server.stop()


async def test_tls_connection_accepted_before_stop_is_closed_after_its_handshake(certs) -> None:
    """A TLS connection accepted before stop() whose handshake ends after it is
    closed, as the stock listener closes it: no handler will ever take it, and
    its client would wait in distributed's handshake, which has no timeout."""
    tls = next(v for v in OWN if v.tls)
    handed: list = []
    async with serve(tls, certs, handed.append) as listener:
        host, port = listener.get_host_port()
        raw = socket.create_connection((host, port), timeout=WAIT)
        raw.setblocking(False)
        for _ in range(WAIT * 50):  # until the listener has accepted it
            if listener._tasks.running:
                break
            await asyncio.sleep(0.02)
        assert listener._tasks.running
        listener.stop()
        ctx = tls.connect_args(certs)["ssl_context"]
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(sock=raw, ssl=ctx, server_hostname="localhost"), WAIT
        )
        try:
            assert await asyncio.wait_for(reader.read(), WAIT) == b""  # closed, unread
        finally:
            writer.close()
    assert handed == []


async def test_tls_stop_frees_the_port_at_once(certs) -> None:
    tls = next(v for v in OWN if v.tls)
    listener = listen(f"{tls.scheme}://127.0.0.1:0", echo, **tls.listen_args(certs))
    await listener.start()
    port = listener.get_host_port()[1]
    listener.stop()
    again = socket.socket()
    try:
        again.bind(("127.0.0.1", port))  # no await in between
    finally:
        again.close()


def test_candidates_follow_tornado() -> None:
    """AF_INET first, duplicates once, macOS's link-local localhost entry out."""
    v4 = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))
    v6 = (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", 0, 0, 0))
    link = (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fe80::1%lo0", 0, 0, 1))
    infos = [v6, link, v4, v6]
    assert candidates(infos, "localhost", platform="linux") == [v4, v6, link]
    assert candidates(infos, "localhost", platform="darwin") == [v4, v6]
    assert candidates(infos, "example", platform="darwin") == [v4, v6, link]


def test_bind_without_ipv6_binds_ipv4_only() -> None:
    with no_ipv6():
        sockets = bind_sockets("", 0, 16)
    try:
        assert [s.family for s in sockets] == [socket.AF_INET]
        assert sockets[0].getsockname()[0] == "0.0.0.0"
    finally:
        for s in sockets:
            s.close()
    with no_ipv6(), pytest.raises(OSError) as info:
        bind_sockets("::1", 0, 16)
    assert info.value.errno == errno.EAFNOSUPPORT


@pytest.mark.parametrize("protocol", ["asyncio", "tcp"])
async def test_scheduler_cli_starts_without_ipv6(protocol, loop_name) -> None:
    """``dask scheduler --protocol ...`` on a host whose kernel has no IPv6
    (socket() fails with EAFNOSUPPORT for AF_INET6): it starts, on all
    interfaces, and serves. ``tcp`` is the stock comm, for reference."""
    dask_cli = os.path.join(os.path.dirname(sys.executable), "dask")
    wrapper = NO_IPV6_PRELUDE + textwrap.dedent(
        f"""
        import runpy, sys
        sys.argv = [{dask_cli!r}, *sys.argv[1:]]
        runpy.run_path({dask_cli!r}, run_name="__main__")
        """
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", wrapper, "scheduler", "--protocol", protocol,
        "--port", "0", "--no-dashboard",
        env=loop_env(loop_name), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
    )
    lines: list[str] = []
    try:
        port = None
        while port is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), 2 * WAIT)).decode()
            assert line, "scheduler exited:\n" + "".join(lines)
            lines.append(line)
            if "Scheduler at:" in line:
                port = int(line.rsplit(":", 1)[1])
        async with rpc(f"{protocol}://127.0.0.1:{port}") as scheduler:
            info = await asyncio.wait_for(scheduler.identity(), WAIT)
        assert info["type"] == "Scheduler"
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), WAIT)


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

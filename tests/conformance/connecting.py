"""Conformance checks of connecting: happy eyeballs (a host name whose IPv6
address is silent falls back to IPv4 as the stock connector does).

The check runs its client in a subprocess inside a mount namespace whose
``/etc/hosts`` puts ``::1`` first for ``localhost``; this module is also that
client (``python -m tests.conformance.connecting client ...``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from distributed.comm import connect, listen

from tests.certs import Certs
from tests.peers.conn import echo
from tests.variants import VARIANTS, Variant

#: Upper bound for any single wait in these checks (a hang fails, never blocks CI).
WAIT = 30
#: The distributed connect timeout the client gets: met by a 0.3 s fallback,
#: never by a connector that waits for a silent IPv6 address first.
EYEBALLS_TIMEOUT = 5
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@contextlib.contextmanager
def silent_ipv6_port() -> Iterator[int]:
    """A port whose ``[::1]`` end drops every SYN, as a broken IPv6 route does:
    a listener with a backlog of 0 that never accepts, its queue filled."""
    server = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    filler = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        server.bind(("::1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        filler.settimeout(WAIT)
        filler.connect(("::1", port))  # takes the only place in the accept queue
        yield port
    finally:
        filler.close()
        server.close()


def _can_unshare() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "true"],
        capture_output=True,
        timeout=WAIT,
    )
    return probe.returncode == 0


def _loop_name() -> str:
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


async def _eyeballs_client(variant: Variant, certs: Certs, address: str, loop: str) -> Any:
    hosts = tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False)
    with hosts:
        hosts.write("::1 localhost\n127.0.0.1 localhost\n")
    argv = [
        shutil.which("unshare") or "unshare", "--mount", "--propagation", "private",
        "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', hosts.name,
        sys.executable, "-m", "tests.conformance.connecting", "client",
        variant.name, address, json.dumps(dataclasses.asdict(certs)),
    ]
    env = dict(os.environ, DASK_DISTRIBUTED__ADMIN__EVENT_LOOP=loop)
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 4 * WAIT)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    finally:
        os.unlink(hosts.name)
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def check_connect_falls_back_to_ipv4(variant: Variant, certs: Certs) -> None:
    """``localhost`` resolves to ``::1`` first and ``::1`` is silent: the
    connector falls back to IPv4 well within a 5 s connect timeout. Over TLS the
    handshake runs on the winner, and SNI names the host asked for."""
    if not _can_unshare():
        pytest.skip("needs root and unshare for a private /etc/hosts")
    names: list[str | None] = []
    args = variant.listen_args(certs)
    if variant.tls:
        args["ssl_context"].sni_callback = lambda _s, name, _c: names.append(name)
    with silent_ipv6_port() as port:
        listener = listen(f"{variant.scheme}://127.0.0.1:{port}", echo, **args)
        try:
            await listener.start()
        except OSError as e:
            pytest.skip(f"127.0.0.1:{port} is taken: {e}")
        try:
            out = await _eyeballs_client(
                variant, certs, f"{variant.scheme}://localhost:{port}", _loop_name()
            )
        finally:
            listener.stop()
    assert out["echo"] == {"op": "eyeballs"}, out
    assert out["local"].startswith(f"{variant.scheme}://127.0.0.1:"), out
    if variant.tls:
        assert names == ["localhost"], names


async def _client(variant: Variant, certs: Certs, address: str) -> dict[str, Any]:
    with variant.active():
        comm = await connect(address, timeout=EYEBALLS_TIMEOUT, **variant.connect_args(certs))
        try:
            await comm.write({"op": "eyeballs"})
            got = await asyncio.wait_for(comm.read(), WAIT)
        finally:
            await comm.close()
    return {"echo": got, "local": comm.local_address}


def main(argv: list[str]) -> None:
    """``client VARIANT ADDRESS CERTS_JSON``: connect, echo once, print JSON."""
    from distributed.config import get_loop_factory

    _, name, address, certs_json = argv
    variant = next(v for v in VARIANTS if v.name == name)
    certs = Certs(**json.loads(certs_json))
    make = get_loop_factory()
    loop = make() if make is not None else asyncio.new_event_loop()
    try:
        print(json.dumps(loop.run_until_complete(_client(variant, certs, address))))
    finally:
        loop.close()


if __name__ == "__main__":
    main(sys.argv[1:])

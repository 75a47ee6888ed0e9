"""The happy-eyeballs race and the resolver's numeric fast path, on real loopback
sockets: a silent ``[::1]`` port (a full accept queue drops SYNs, as a broken
IPv6 route does), a refused one, and a listening ``127.0.0.1``. The whole path
through a host name is ``tests/conformance/connecting.py``."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
from collections.abc import Iterator

import pytest

from asynciocomm.sockets.eyeballs import connect_first, numeric, resolve, split
from tests.conformance.connecting import silent_ipv6_port
from tests.helpers_net import WAIT

V4, V6 = socket.AF_INET, socket.AF_INET6


def _fds() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


async def _settled(before: int) -> int:
    for _ in range(100):
        if _fds() <= before:
            break
        await asyncio.sleep(0.02)
    return _fds()


@contextlib.contextmanager
def ipv4_listener(port: int = 0) -> Iterator[socket.socket]:
    sock = socket.socket(V4, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(16)
        yield sock
    finally:
        sock.close()


def _closed_port(family: int, host: str) -> int:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def test_numeric_hosts_resolve_without_a_lookup() -> None:
    assert numeric("127.0.0.1", 80) == [(V4, ("127.0.0.1", 80))]
    assert numeric("::1", 80) == [(V6, ("::1", 80, 0, 0))]
    assert numeric("localhost", 80) is None  # a name: the loop resolves it


async def test_resolve_names_through_the_loop() -> None:
    got = await resolve("localhost", 80)
    assert got and all(port == 80 for _, (_, port, *_) in got)


def test_split_keeps_the_first_family_first() -> None:
    addrs = [(V6, ("::1", 1)), (V4, ("127.0.0.1", 1)), (V6, ("::2", 1))]
    assert split(addrs) == ([(V6, ("::1", 1)), (V6, ("::2", 1))], [(V4, ("127.0.0.1", 1))])


async def test_silent_ipv6_falls_back_to_ipv4_and_closes_the_loser() -> None:
    with silent_ipv6_port() as port, ipv4_listener() as server:
        before = _fds()
        v4 = server.getsockname()[1]
        addrs = [(V6, ("::1", port, 0, 0)), (V4, ("127.0.0.1", v4))]
        sock = await asyncio.wait_for(connect_first(addrs), WAIT)
        try:
            assert sock.family == V4 and sock.getpeername() == ("127.0.0.1", v4)
        finally:
            sock.close()
        assert await _settled(before) == before  # the IPv6 attempt was closed


async def test_a_refused_first_family_starts_the_other_at_once() -> None:
    """Tornado's rule: a failed attempt starts the other family without waiting
    for the delay (here a delay no test could wait for)."""
    with ipv4_listener() as server:
        addrs = [(V6, ("::1", _closed_port(V6, "::1"), 0, 0)), (V4, server.getsockname())]
        sock = await asyncio.wait_for(connect_first(addrs, delay=3600), WAIT)
        sock.close()
        assert sock.family == V4


async def test_every_address_refused_raises_the_last_error() -> None:
    addrs = [
        (V6, ("::1", _closed_port(V6, "::1"), 0, 0)),
        (V4, ("127.0.0.1", _closed_port(V4, "127.0.0.1"))),
    ]
    before = _fds()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.wait_for(connect_first(addrs), WAIT)
    assert await _settled(before) == before


async def test_a_cancelled_race_leaks_nothing() -> None:
    with silent_ipv6_port() as port:
        before = _fds()
        addrs = [(V6, ("::1", port, 0, 0)), (V6, ("::1", port, 0, 0))]
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(connect_first(addrs, delay=0.05), 0.5)
        assert await _settled(before) == before

"""The code paths of platforms this machine is not: macOS, Windows, a Python
without IPv6, a kernel without SO_REUSEPORT, an install without uvloop.

What is absent is simulated where the code looks for it (``sys.platform``, a
missing ``socket`` constant, ``socket.has_ipv6``, a blocked import), and each
answer is compared with what the stock comm does under the same simulation:
``distributed.comm.tcp.set_tcp_timeout`` is the oracle for socket options.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from distributed.comm import tcp

from asynciocomm.sockets import binding
from asynciocomm.sockets.sockopts import configure_socket

TIMEOUT = 30  # distributed.comm.timeouts.tcp's default
KEEPALIVE_NAMES = ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")
#: A stand-in number for Windows' SIO_KEEPALIVE_VALS where socket lacks it.
SIO_KEEPALIVE_VALS = 0x98000004


class Recorder:
    """A socket that records the options set on it, for both comms to set."""

    family = socket.AF_INET

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.calls.append(("setsockopt", level, option, value))

    def ioctl(self, control: int, value: tuple[int, int, int]) -> None:
        self.calls.append(("ioctl", control, value))


class StockComm:
    """What stock's set_tcp_timeout reads of a comm."""

    def __init__(self, sock: Recorder) -> None:
        self.socket = sock

    def closed(self) -> bool:
        return False


def keepalive_calls(calls: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Everything but TCP_NODELAY, which tornado, not set_tcp_timeout, sets."""
    return [c for c in calls if c[:3] != ("setsockopt", socket.IPPROTO_TCP, socket.TCP_NODELAY)]


def both(monkeypatch: pytest.MonkeyPatch, platform: str) -> tuple[list, list]:
    ours, stock = Recorder(), Recorder()
    configure_socket(ours, TIMEOUT, platform=platform)
    with monkeypatch.context() as m:
        m.setattr(tcp.sys, "platform", platform)
        tcp.set_tcp_timeout(StockComm(stock))
    return keepalive_calls(ours.calls), stock.calls


@pytest.mark.parametrize("named", [True, False], ids=["named-options", "numbers-only"])
def test_macos_keepalive_is_stocks_and_has_no_user_timeout(monkeypatch, named):
    if not named:
        for name in KEEPALIVE_NAMES:
            monkeypatch.delattr(socket, name, raising=False)
    ours, stock = both(monkeypatch, "darwin")
    assert ours == stock
    options = [c[2] for c in ours if c[0] == "setsockopt" and c[1] == socket.IPPROTO_TCP]
    assert 18 not in options  # TCP_USER_TIMEOUT is Linux's
    if not named:
        assert sorted(options) == [0x10, 0x101, 0x102]


def test_windows_keepalive_goes_through_the_ioctl_as_stocks(monkeypatch):
    monkeypatch.setattr(socket, "SIO_KEEPALIVE_VALS", SIO_KEEPALIVE_VALS, raising=False)
    ours, stock = both(monkeypatch, "win32")
    assert ours == stock
    assert ours == [("ioctl", SIO_KEEPALIVE_VALS, (1, 10_000, 2_000))]


def test_linux_sets_stocks_keepalive_and_user_timeout(monkeypatch):
    ours, stock = both(monkeypatch, "linux")
    assert sorted(ours) == sorted(stock)
    assert ("setsockopt", socket.IPPROTO_TCP, 18, TIMEOUT * 1000) in ours


def test_a_platform_without_keepalive_options_sets_keepalive_only(monkeypatch):
    for name in KEEPALIVE_NAMES:
        monkeypatch.delattr(socket, name, raising=False)
    ours, stock = both(monkeypatch, "openbsd7")
    assert ours == stock == [("setsockopt", socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]


def test_a_python_without_ipv6_binds_ipv4_only(monkeypatch):
    monkeypatch.setattr(socket, "has_ipv6", False)
    sockets = binding.bind_sockets("", 0, 16)
    try:
        assert sockets and {s.family for s in sockets} == {socket.AF_INET}
    finally:
        for s in sockets:
            s.close()


def test_a_kernel_without_so_reuseport_binds(monkeypatch):
    # Neither comm asks for SO_REUSEPORT (tornado's bind_sockets only with
    # reuse_port=True, which distributed never passes): its absence must not matter.
    monkeypatch.delattr(socket, "SO_REUSEPORT", raising=False)
    sockets = binding.bind_sockets("127.0.0.1", 0, 16)
    try:
        assert len(sockets) == 1
    finally:
        for s in sockets:
            s.close()


def test_without_uvloop_the_comm_runs_on_the_asyncio_loop():
    # A fresh interpreter where ``import uvloop`` fails, as on Windows.
    script = textwrap.dedent(
        """
        import sys
        sys.modules["uvloop"] = None
        import asyncio
        from distributed.comm import connect, listen

        async def main():
            async def handler(comm):
                await comm.write(await comm.read())
                await comm.close()

            async with listen("asyncio://127.0.0.1:0", handler) as listener:
                comm = await connect(listener.contact_address)
                await comm.write({"op": "ping", "x": list(range(5))})
                print(await comm.read())
                print(type(asyncio.get_running_loop()).__module__)
                await comm.close()

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    message, loop_module = out.stdout.splitlines()
    assert message == "{'op': 'ping', 'x': (0, 1, 2, 3, 4)}"  # msgpack arrays as tuples, as stock
    assert loop_module.startswith("asyncio"), loop_module

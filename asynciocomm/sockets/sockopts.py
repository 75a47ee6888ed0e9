"""Socket options every comm socket gets: no Nagle delay, keepalive, user timeout.

The values follow the stock tcp comm (``distributed.comm.timeouts.tcp``, 10 probes),
so a dead peer is detected in the same time on either transport.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from asynciocomm.log import get_logger

logger = get_logger(__name__)

#: Keepalive probes before the kernel declares the peer dead (the stock comm's choice).
KEEPALIVE_PROBES = 10
_TCP_USER_TIMEOUT = getattr(socket, "TCP_USER_TIMEOUT", 18)  # Linux >= 2.6.37


def reuse_address(os_name: str = os.name) -> bool:
    """Whether listening sockets get SO_REUSEADDR: on POSIX only, as tornado and
    asyncio decide. On POSIX it only lets a port be bound again while closed
    connections linger in TIME_WAIT; on Windows it lets a second process bind a
    port that a listener still holds (SO_EXCLUSIVEADDRUSE semantics are not the
    default there), so a second scheduler would start on a port in use."""
    return os_name != "nt"


def keepalive_schedule(timeout: int) -> tuple[int, int]:
    """(idle, interval) seconds such that idle + probes * interval == timeout."""
    if timeout < KEEPALIVE_PROBES + 1:
        raise ValueError(
            f"distributed.comm.timeouts.tcp must be at least {KEEPALIVE_PROBES + 1} s"
        )
    idle = max(2, timeout // 4)
    interval = max(1, (timeout - idle) // KEEPALIVE_PROBES)
    return timeout - interval * KEEPALIVE_PROBES, interval


#: Where macOS's ``socket`` module lacks the keepalive names (an older Python or
#: SDK), the stock comm falls back to these numbers (TCP_KEEPALIVE, TCP_KEEPINTVL,
#: TCP_KEEPCNT in <netinet/tcp.h>), and so does this one, so that both probe a dead
#: peer alike.
_DARWIN_KEEPALIVE = (0x10, 0x101, 0x102)


def _keepalive_options(platform: str) -> tuple[int, int, int] | None:
    """(idle, interval, count) option numbers, as the stock comm finds them."""
    try:
        return socket.TCP_KEEPIDLE, socket.TCP_KEEPINTVL, socket.TCP_KEEPCNT
    except AttributeError:
        return _DARWIN_KEEPALIVE if platform == "darwin" else None


def configure_socket(sock: Any, tcp_timeout: int, platform: str = sys.platform) -> None:
    """Set TCP_NODELAY, keepalive and TCP_USER_TIMEOUT on a connected socket.

    ``sock`` is a socket or asyncio's TransportSocket wrapper. The keepalive follows
    ``distributed.comm.tcp.set_tcp_timeout`` option by option on each platform:
    Windows takes the schedule through ``SIO_KEEPALIVE_VALS`` (its probe count is
    fixed at 10), macOS through its own option numbers, Linux adds
    ``TCP_USER_TIMEOUT``. ``platform`` is ``sys.platform``; tests pass another to
    exercise the branches this machine does not take. Failures are logged, not
    raised: a socket option is never worth a connection.
    """
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        idle, interval = keepalive_schedule(tcp_timeout)
        if platform.startswith("win"):
            sock.ioctl(socket.SIO_KEEPALIVE_VALS, (1, idle * 1000, interval * 1000))
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            options = _keepalive_options(platform)
            if options is not None:
                idle_opt, interval_opt, count_opt = options
                sock.setsockopt(socket.IPPROTO_TCP, count_opt, KEEPALIVE_PROBES)
                sock.setsockopt(socket.IPPROTO_TCP, idle_opt, idle)
                sock.setsockopt(socket.IPPROTO_TCP, interval_opt, interval)
        if platform.startswith("linux"):
            sock.setsockopt(socket.IPPROTO_TCP, _TCP_USER_TIMEOUT, tcp_timeout * 1000)
    except OSError:
        logger.exception("Could not set TCP options on %r", sock)

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


def configure_socket(sock: Any, tcp_timeout: int) -> None:
    """Set TCP_NODELAY, keepalive and TCP_USER_TIMEOUT on a connected socket.

    ``sock`` is a socket or asyncio's TransportSocket wrapper. Failures are logged,
    not raised: a socket option is never worth a connection.
    """
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        idle, interval = keepalive_schedule(tcp_timeout)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
        if sys.platform.startswith("linux"):
            sock.setsockopt(socket.IPPROTO_TCP, _TCP_USER_TIMEOUT, tcp_timeout * 1000)
    except OSError:
        logger.exception("Could not set TCP options on %r", sock)

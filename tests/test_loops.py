"""asynciocomm.loops: which event loop an object belongs to, on both loops."""

from __future__ import annotations

import asyncio
import socket

from asynciocomm.loops import of_uvloop
from tests.conftest import running_loop_name


async def test_the_loop_and_its_transports_are_told_apart() -> None:
    loop = asyncio.get_running_loop()
    expected = running_loop_name() == "uvloop"
    assert of_uvloop(loop) is expected
    ours, peer = socket.socketpair()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    try:
        assert of_uvloop(transport) is expected
    finally:
        transport.close()
        peer.close()


def test_asyncios_own_loop_and_other_objects_are_not_uvloops() -> None:
    loop = asyncio.new_event_loop()  # asyncio's, whatever distributed's setting
    try:
        assert not of_uvloop(loop)
    finally:
        loop.close()
    assert not of_uvloop(object())

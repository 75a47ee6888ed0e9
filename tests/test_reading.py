"""asynciocomm.reading: the reasons to pause a transport's reading combine, and
the end wins, on a real connected transport of each loop."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

from asynciocomm.reading import FLOW, ReadSwitch


@contextlib.asynccontextmanager
async def _transport() -> AsyncIterator[asyncio.Transport]:
    """A connected transport of the running loop, closed with its peer afterwards."""
    ours, peer = socket.socketpair()
    transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
        asyncio.Protocol, ours)
    try:
        yield transport
    finally:
        transport.close()
        peer.close()


async def _one_iteration() -> None:
    # A future resolved by call_soon now runs after every callback that was
    # already scheduled, the switch's end of yield included.
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    loop.call_soon(fut.set_result, None)
    await fut


async def test_a_yield_and_flow_control_hold_reading_until_both_let_go() -> None:
    async with _transport() as transport:
        switch = ReadSwitch(transport, asyncio.get_running_loop())
        switch.hold(FLOW)
        switch.yield_to_reader()
        assert not transport.is_reading()
        switch.release(FLOW)  # the yield still holds it
        assert not transport.is_reading()
        await _one_iteration()
        assert transport.is_reading()
        switch.yield_to_reader()
        switch.hold(FLOW)
        await _one_iteration()  # the yield ended; flow control still holds
        assert not transport.is_reading() and switch.held(FLOW)
        switch.release(FLOW)
        assert transport.is_reading()


async def test_after_stop_nothing_resumes_reading() -> None:
    async with _transport() as transport:
        switch = ReadSwitch(transport, asyncio.get_running_loop())
        switch.yield_to_reader()
        switch.hold(FLOW)
        switch.stop()
        switch.release(FLOW)
        switch.yield_to_reader()
        await _one_iteration()
        assert not transport.is_reading()


async def test_a_detached_switch_lets_go_of_the_transport() -> None:
    async with _transport() as transport:
        switch = ReadSwitch(transport, asyncio.get_running_loop())
        switch.yield_to_reader()
        switch.detach()
        await _one_iteration()  # the cancelled yield touches nothing
        assert not transport.is_reading()
        assert switch._transport is None

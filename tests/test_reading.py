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
        switch = ReadSwitch(transport, asyncio.get_running_loop(), 1000, 64)
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
        switch = ReadSwitch(transport, asyncio.get_running_loop(), 1000, 64)
        switch.yield_to_reader()
        switch.hold(FLOW)
        switch.stop()
        switch.release(FLOW)
        switch.yield_to_reader()
        await _one_iteration()
        assert not transport.is_reading()


async def test_a_detached_switch_lets_go_of_the_transport() -> None:
    async with _transport() as transport:
        switch = ReadSwitch(transport, asyncio.get_running_loop(), 1000, 64)
        switch.yield_to_reader()
        switch.detach()
        await _one_iteration()  # the cancelled yield touches nothing
        assert not transport.is_reading()
        assert switch._transport is None


async def test_unread_bytes_above_read_pause_hold_reading_until_half_is_left() -> None:
    async with _transport() as transport:
        switch = ReadSwitch(transport, asyncio.get_running_loop(), 1000, 64)
        switch.received(completed=1000, woke_reader=False, unread=1000)
        assert transport.is_reading()  # at the bound, not above it
        switch.received(completed=1, woke_reader=False, unread=1001)
        assert not transport.is_reading() and switch.held(FLOW)
        switch.delivered(unread=501)
        assert not transport.is_reading()
        switch.delivered(unread=500)
        assert transport.is_reading()


async def test_only_a_pooled_frame_that_woke_a_reader_yields() -> None:
    async with _transport() as transport:
        switch = ReadSwitch(transport, asyncio.get_running_loop(), 10**9, 64)
        switch.received(completed=63, woke_reader=True, unread=63)  # a small message
        switch.received(completed=64, woke_reader=False, unread=127)  # nobody waited
        assert transport.is_reading()
        switch.received(completed=64, woke_reader=True, unread=191)
        assert not transport.is_reading()
        await _one_iteration()
        assert transport.is_reading()
        without_pool = ReadSwitch(transport, asyncio.get_running_loop(), 10**9, None)
        without_pool.received(completed=10**8, woke_reader=True, unread=10**8)
        assert transport.is_reading()

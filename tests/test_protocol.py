"""The protocol layer (asynciocomm.protocol, asynciocomm.writer) in the h11 style:
bytes and transport events fed by hand through a transport of the tests' own,
no sockets. What a real transport does (flow control, the order of callbacks)
is checked over real sockets elsewhere (tests/conformance, test_writer.py,
test_flow_control.py); here each rule of the protocol is driven on its own."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from distributed.comm.core import CommClosedError
from distributed.comm.tcp import _add_frames_header
from distributed.protocol import dumps

from asynciocomm.config import load_settings
from asynciocomm.protocol import FramedProtocol
from tests.helpers_net import encode_msg


def message_frames(msg: Any) -> list[Any]:
    """``msg``'s frames, as the codec gives them to the protocol."""
    return list(dumps(msg))


def wire(frames: list[bytes]) -> bytes:
    """``frames`` as the stock writer frames them on the wire."""
    out, _, _ = _add_frames_header(list(frames))
    return b"".join(bytes(memoryview(b).cast("B")) for b in out)


class HandTransport:
    """An asyncio transport driven by the test: it keeps what is written,
    sends nothing, and calls the protocol's flow-control callbacks as asyncio's
    transports do (pause above the high-water mark, resume at or below the low
    one once :meth:`take` lets bytes leave)."""

    def __init__(self, protocol: FramedProtocol, tls: bool = False) -> None:
        self.protocol = protocol
        self.tls = tls
        self.written: list[bytes] = []
        self.calls: list[str] = []
        self.buffered = 0
        self.high = 64 * 1024
        self.low = 16 * 1024
        self.paused_protocol = False
        self.reading = True
        self.closing = False
        self.aborted = False

    # -- the Transport API the protocol uses ------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "sslcontext":
            return object() if self.tls else None
        return default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high, self.low = high or 0, low or 0
        self._maybe_pause()

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def write(self, data: Any) -> None:
        self.calls.append("write")
        self._keep([data])

    def writelines(self, data: Any) -> None:
        self.calls.append("writelines")
        self._keep(list(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = self.aborted = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    # -- the test's hand ----------------------------------------------------------

    def _keep(self, buffers: list[Any]) -> None:
        for buf in buffers:
            data = bytes(memoryview(buf).cast("B"))
            self.written.append(data)
            self.buffered += len(data)
        self._maybe_pause()

    def _maybe_pause(self) -> None:
        if self.buffered > self.high and not self.paused_protocol:
            self.paused_protocol = True
            self.protocol.pause_writing()

    def take(self, n: int | None = None) -> None:
        """The kernel takes ``n`` buffered bytes (all by default)."""
        self.buffered -= self.buffered if n is None else min(n, self.buffered)
        if self.paused_protocol and self.buffered <= self.low:
            self.paused_protocol = False
            self.protocol.resume_writing()

    def feed(self, data: bytes, piece: int | None = None) -> None:
        """Bytes arrive, as the loop hands them to a BufferedProtocol."""
        view = memoryview(data)
        while view:
            buf = self.protocol.get_buffer(-1)
            n = min(len(buf), len(view), piece or len(view))
            buf[:n] = view[:n]
            view = view[n:]
            self.protocol.buffer_updated(n)

    def sent(self) -> bytes:
        return b"".join(self.written)


#: Flow-control marks small enough for hand-made messages to cross them.
MARKS = {"write_high_water": 64 * 1024, "write_low_water": 16 * 1024}


def connected(tls: bool = False, **settings: Any) -> tuple[FramedProtocol, HandTransport]:
    s = dataclasses.replace(load_settings(), **{**MARKS, **settings})
    protocol = FramedProtocol(s)
    transport = HandTransport(protocol, tls)
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


def frames_of(item: Any) -> list[bytes]:
    frames, _ = item
    return [bytes(f) for f in frames]


# -- reading --------------------------------------------------------------------


@pytest.mark.parametrize("piece", [None, 1, 7])
async def test_messages_are_read_whole_or_fed_a_byte_at_a_time(piece: int | None) -> None:
    protocol, transport = connected()
    wire = encode_msg({"op": "a"}) + encode_msg({"op": "b", "x": b"y" * 70_000})
    transport.feed(wire, piece)
    first, second = protocol.read_nowait(), protocol.read_nowait()
    assert first is not None and second is not None
    assert protocol.read_nowait() is None  # nothing more, connection open


async def test_a_reader_waiting_is_woken_by_a_message() -> None:
    protocol, transport = connected()
    assert protocol.read_nowait() is None
    readable = protocol.readable()
    transport.feed(encode_msg("hello"))
    assert readable.done()
    assert protocol.read_nowait() is not None


async def test_reading_pauses_above_read_pause_and_resumes_once_delivered() -> None:
    protocol, transport = connected(read_pause=100_000)
    big = encode_msg({"x": b"z" * 60_000})
    transport.feed(big)
    assert transport.reading
    transport.feed(big)  # 120 kB unread
    assert not transport.reading
    protocol.read_nowait()
    assert not transport.reading  # taken by read(), not returned yet: still unread
    protocol.delivered()
    assert not transport.reading  # 60 kB unread: more than half of read-pause
    protocol.read_nowait()
    protocol.delivered()
    assert transport.reading


async def test_messages_before_the_peers_end_are_read_then_the_end_is_raised() -> None:
    protocol, transport = connected()
    transport.feed(encode_msg(1) + encode_msg(2))
    keep_open = protocol.eof_received()
    assert keep_open  # plain TCP: replies to those requests can still go out
    assert not protocol.finished
    assert protocol.read_nowait() is not None
    assert protocol.read_nowait() is not None
    assert protocol.finished
    with pytest.raises(CommClosedError, match="Stream is closed"):
        protocol.read_nowait()


async def test_over_tls_the_end_closes_the_transport_even_with_messages_unread() -> None:
    protocol, transport = connected(tls=True)
    transport.feed(encode_msg(1))
    assert not protocol.eof_received()
    assert protocol.read_nowait() is not None


async def test_an_end_in_the_middle_of_a_message_says_so() -> None:
    protocol, transport = connected()
    transport.feed(encode_msg({"x": b"q" * 1000})[:500])
    protocol.eof_received()
    with pytest.raises(CommClosedError, match="in the middle of a message"):
        protocol.read_nowait()


async def test_a_lost_connection_raises_its_reason_without_its_traceback() -> None:
    protocol, transport = connected()
    try:
        raise ConnectionResetError("reset by peer")
    except ConnectionResetError as exc:
        reason = exc
    protocol.connection_lost(reason)
    with pytest.raises(CommClosedError, match="reset by peer") as info:
        protocol.read_nowait()
    assert info.value.__cause__ is reason and reason.__traceback__ is None


@pytest.mark.parametrize("tls_client", [False, True], ids=["garbage", "tls-client-hello"])
async def test_a_peer_that_breaks_the_protocol_is_closed_after_what_was_written(
    tls_client: bool,
) -> None:
    protocol, transport = connected()
    protocol.send(message_frames("owed to the peer"))
    bad = b"\x16\x03\x01" + b"\x00" * 40 if tls_client else b"\xff" * 64
    transport.feed(bad)
    assert transport.closing and not transport.reading
    assert transport.sent().startswith(encode_msg("owed to the peer"))
    if tls_client:
        assert transport.written[-1] == bytes([21, 3, 1, 0, 2, 2, 70])  # a TLS alert
    with pytest.raises(CommClosedError, match="protocol error"):
        protocol.read_nowait()


# -- writing --------------------------------------------------------------------


async def test_a_lone_write_goes_at_once_and_the_next_ones_in_one_batch() -> None:
    protocol, transport = connected()
    for i in range(5):
        assert protocol.send(message_frames(i)) == len(encode_msg(i))  # accepted at once
    assert transport.written == [encode_msg(0)]  # write-through
    await asyncio.sleep(0)  # the loop turns: the batch leaves in one call
    assert transport.calls == ["write", "write"]
    assert transport.sent() == b"".join(encode_msg(i) for i in range(5))


async def test_writers_wait_their_turn_in_call_order_and_a_cancelled_one_sends_nothing() -> None:
    protocol, transport = connected()
    big = b"b" * 100_000
    assert protocol.send([big]) == len(wire([big]))  # accepted: above high water now
    waiting = [protocol.send(message_frames(i)) for i in range(3)]
    assert not any(isinstance(w, int) for w in waiting)
    tasks = [asyncio.ensure_future(w) for w in waiting]  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert not any(t.done() for t in tasks) and transport.sent() == wire([big])
    tasks[1].cancel()
    transport.take()  # the kernel took everything: resume_writing
    await asyncio.gather(tasks[0], tasks[2])
    assert tasks[1].cancelled()
    await asyncio.sleep(0)
    assert transport.sent() == wire([big]) + encode_msg(0) + encode_msg(2)


async def test_close_sends_what_waits_then_closes() -> None:
    protocol, transport = connected()
    big = b"b" * 100_000
    protocol.send([big])
    waiting = asyncio.ensure_future(protocol.send(message_frames("after")))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    closing = asyncio.ensure_future(protocol.close())
    await asyncio.sleep(0)
    assert not transport.closing  # bytes are still in the transport
    transport.take()
    await asyncio.wait_for(waiting, 5)
    for _ in range(3):
        await asyncio.sleep(0)
    transport.take()
    for _ in range(3):
        await asyncio.sleep(0)
    assert transport.closing and transport.sent() == wire([big]) + encode_msg("after")
    protocol.connection_lost(None)
    await asyncio.wait_for(closing, 5)


async def test_abort_hands_the_batch_over_then_aborts_a_loop_turn_later() -> None:
    protocol, transport = connected()
    protocol.send(message_frames(1))
    protocol.send(message_frames(2))  # batched
    protocol.abort()
    assert transport.sent() == encode_msg(1) + encode_msg(2) and not transport.aborted
    await asyncio.sleep(0)
    assert transport.aborted
    with pytest.raises(CommClosedError):
        await protocol.send(message_frames(3))  # type: ignore[misc]


async def test_writers_waiting_when_the_connection_is_lost_are_refused() -> None:
    protocol, transport = connected()
    big = b"b" * 100_000
    protocol.send([big])
    waiting = asyncio.ensure_future(protocol.send(message_frames(1)))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    protocol.connection_lost(ConnectionResetError("gone"))
    with pytest.raises(CommClosedError, match="gone"):
        await waiting

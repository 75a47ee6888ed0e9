"""The bare-protocol references answer the framing alike, on both loops."""

from __future__ import annotations

import asyncio

import pytest

from asynciocomm_bench.comm import drivers, rawproto
from asynciocomm_bench.common.loops import run_on_loop


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("factory", [rawproto.RawServerProtocol, rawproto.RawTaskServerProtocol,
                                     rawproto.RawKeepServerProtocol])
def test_reference_servers_answer_pings_and_count_sinks(factory, loop: str) -> None:
    async def exchange() -> tuple[int, int, bool]:
        server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        driver = drivers.RawAioDriver(f"127.0.0.1:{port}")
        conn = await driver.connect()
        try:
            for _ in range(3):
                await driver.ping(conn)
            for size in (10, 70_000, 3 * 2**20):  # whole, split and skipped payloads
                for _ in range(5):
                    await driver.send(conn, driver.message(size))
            sunk = await driver.sync(conn)
            again = await driver.sync(conn)
            await driver.close(conn)
            return sunk, again, conn.closed.done()
        finally:
            server.close()

    async def main() -> tuple[int, int, bool]:
        return await asyncio.wait_for(exchange(), 60)  # a server that never answers fails

    assert run_on_loop(main, loop) == (15, 0, True)


class _Writes:
    """Collects what the protocol writes back (the unit under test is the
    protocol's parsing; the socket path is covered above)."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.out += data

    def close(self) -> None:
        self.closed = True


class _Recording(rawproto.RawKeepServerProtocol):
    """Reads each complete SINK payload back from the buffer the protocol keeps it in."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[bytes] = []
        self.buffers: list[bytearray] = []  # the buffer each SINK was kept in

    def _message(self, op: int, length: int) -> None:
        if op == rawproto.SINK:
            self.kept.append(bytes(self.payloads[self.turn][:length]))
            self.buffers.append(self.payloads[self.turn])
        super()._message(op, length)


def _feed(proto: rawproto.RawKeepServerProtocol, data: bytes, step: int) -> None:
    """Feed ``data`` through get_buffer/buffer_updated in reads of at most ``step`` bytes."""
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        n = min(step, len(buf), len(data) - pos)
        buf[:n] = data[pos:pos + n]
        proto.buffer_updated(n)
        pos += n


@pytest.mark.parametrize("step", [1, 7, 4096, 1 << 30])
def test_keep_reference_keeps_every_payload_whole(step: int) -> None:
    """Byte by byte or all at once, small and large payloads land intact in the
    buffer the protocol keeps, the two buffers alternate, a PING is echoed
    whole and SYNC answers the count."""
    payloads = [bytes([i]) * size for i, size in
                enumerate([0, 5, 70_000, 3, 200_000, 65_536 - 9, 1])]
    ping = b"p" * 100
    stream = b"".join(rawproto.HDR.pack(len(p), rawproto.SINK) + p for p in payloads)
    stream += rawproto.HDR.pack(len(ping), rawproto.PING) + ping
    stream += rawproto.HDR.pack(0, rawproto.SYNC) + rawproto.HDR.pack(0, rawproto.BYE)
    proto = _Recording()
    writes = _Writes()
    proto.connection_made(writes)
    _feed(proto, stream, step)
    assert proto.kept == payloads
    held = proto.buffers  # each message stays whole while the next one arrives
    assert all(a is not b for a, b in zip(held, held[1:]))
    # a buffer is reused unless the message is larger than it
    assert held[3] is held[1] and held[6] is held[4]
    assert bytes(writes.out) == (rawproto.HDR.pack(len(ping), rawproto.PING) + ping
                                 + rawproto.HDR.pack(len(payloads), rawproto.SYNC))
    assert writes.closed
    assert max(len(b) for b in proto.payloads) == 200_000

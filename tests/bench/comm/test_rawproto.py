"""The bare-protocol references answer the framing alike, on both loops."""

from __future__ import annotations

import asyncio

import pytest

from asynciocomm_bench.comm import drivers, rawproto
from asynciocomm_bench.common.loops import run_on_loop


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("factory", [rawproto.RawServerProtocol, rawproto.RawTaskServerProtocol])
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

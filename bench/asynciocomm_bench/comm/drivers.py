"""Client drivers for the async targets of ``comm``: dask comms and bare protocols.

A driver hides how one connection pings, sends one-way messages and syncs,
so that ``asynciocomm_bench.comm.measure`` runs the same loops against both.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from asynciocomm_bench.comm import rawproto

PING_PAYLOAD = b"x" * 64


class CommDriver:
    """Talks to ``asynciocomm_bench.comm.server`` over ``distributed.comm.connect``."""

    def __init__(self, address: str, connection_args: dict[str, Any]) -> None:
        self.address = address
        self.args = connection_args
        self._ping = {"op": "ping", "p": PING_PAYLOAD}
        self._sync = {"op": "sync"}

    async def connect(self) -> Any:
        from distributed.comm import connect

        return await connect(self.address, timeout=20, **self.args)

    def message(self, size: int) -> Any:
        """A one-way message whose payload frame is ``size`` bytes."""
        if size <= 4096:
            return {"op": "s", "p": b"x" * size}
        from distributed.protocol.serialize import to_serialize

        arr = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8)
        return {"op": "s", "p": to_serialize(arr)}

    async def ping(self, conn: Any) -> None:
        await conn.write(self._ping)
        await conn.read()

    async def send(self, conn: Any, msg: Any) -> None:
        await conn.write(msg)

    async def sync(self, conn: Any) -> int:
        await conn.write(self._sync)
        return int((await conn.read())["n"])

    async def close(self, conn: Any) -> None:
        try:
            await conn.write({"op": "bye"})
        finally:
            await conn.close()


class RawAioDriver:
    """Talks to the bare-protocol server with ``asynciocomm_bench.comm.rawproto``."""

    def __init__(self, address: str, ssl: Any = None) -> None:
        host, port = address.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.ssl = ssl
        self._ping = rawproto.HDR.pack(len(PING_PAYLOAD), rawproto.PING) + PING_PAYLOAD
        self._sync = rawproto.HDR.pack(0, rawproto.SYNC)

    async def connect(self) -> rawproto.RawClientProtocol:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(
            rawproto.RawClientProtocol, self.host, self.port, ssl=self.ssl,
            server_hostname="localhost" if self.ssl else None)
        return proto

    def message(self, size: int) -> tuple[bytes, Any]:
        """Header and payload of a SINK message of ``size`` bytes."""
        hdr = rawproto.HDR.pack(size, rawproto.SINK)
        if size <= 4096:
            return hdr + b"x" * size, None
        arr = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8)
        return hdr, memoryview(arr).cast("B")

    async def ping(self, conn: rawproto.RawClientProtocol) -> None:
        await conn.request(self._ping)

    async def send(self, conn: rawproto.RawClientProtocol, msg: tuple[bytes, Any]) -> None:
        conn.transport.write(msg[0])
        if msg[1] is not None:
            conn.transport.write(msg[1])
        await conn.drain()

    async def sync(self, conn: rawproto.RawClientProtocol) -> int:
        return await conn.request(self._sync)

    async def close(self, conn: rawproto.RawClientProtocol) -> None:
        conn.transport.write(rawproto.HDR.pack(0, rawproto.BYE))
        conn.transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(conn.closed), 5)
        except asyncio.TimeoutError:
            pass

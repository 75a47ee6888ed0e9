"""The scheduler-side comm counter counts the same on every comm, stock included."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from distributed.comm.tcp import _add_frames_header
from distributed.comm.utils import to_frames

from asynciocomm_bench.scale import counting
from tests.variants import Variant, connect_to, serve

BATCH = [{"op": "task-finished", "key": f"x-{i}", "nbytes": 28} for i in range(3)]
SINGLE = {"op": "heartbeat-worker", "now": 1.5, "metrics": {"cpu": 2.0}}


@pytest.fixture
def counted() -> Iterator[None]:
    counting.reset()
    counting.install()
    try:
        yield
    finally:
        counting.uninstall()
        counting.reset()


async def _stock_nbytes(msg: object) -> int:
    _, _, total = _add_frames_header(await to_frames(msg))
    return total


async def test_counts(variant: Variant, certs, counted: None) -> None:
    async with serve(variant, certs) as listener:  # an echo server, counted too
        comm = await connect_to(variant, certs, listener.contact_address)
        try:
            sent = [await comm.write(BATCH), await comm.write(SINGLE)]
            assert list(await comm.read()) == BATCH
            assert await comm.read() == SINGLE
        finally:
            await comm.close()
    c = counting.snapshot()
    # both ends are in this process: the client's and the echo server's calls,
    # and each end's handshake
    assert (c["writes"], c["write_msgs"]) == (2 + 4, 2 + 8)
    assert (c["reads"], c["read_msgs"]) == (2 + 4, 2 + 8)
    payload = await _stock_nbytes(BATCH) + await _stock_nbytes(SINGLE)
    assert sum(sent) == payload
    handshake = await _stock_nbytes(comm.handshake_info())
    assert c["write_bytes"] == 2 * (payload + handshake)


async def test_uninstall_gives_the_methods_back(variant: Variant, certs) -> None:
    from distributed.comm.tcp import TCP

    from asynciocomm.comm import AsyncioComm

    before = (TCP.read, TCP.write, AsyncioComm.read, AsyncioComm.write)
    counting.install()
    counting.install()  # idempotent
    assert TCP.read is not before[0]
    counting.uninstall()
    assert (TCP.read, TCP.write, AsyncioComm.read, AsyncioComm.write) == before

"""The scheduler-side comm counter counts the same on every comm, stock included."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from distributed.comm import connect, listen
from distributed.comm.tcp import _add_frames_header
from distributed.comm.utils import to_frames

from asynciocomm_bench.common.options import is_tls
from asynciocomm_bench.common.tlsfiles import make_tls_files
from asynciocomm_bench.scale import counting

#: The stock comms and ours, plain and over TLS.
SCHEMES = ["tcp", "asyncio", "tls", "asyncio+tls"]

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


@pytest.fixture(scope="module")
def security(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_tls_files(Path(tmp_path_factory.mktemp("tls"))).security()


async def _echo(comm: Any) -> None:
    with contextlib.suppress(Exception):
        while True:
            await comm.write(await comm.read())


@contextlib.asynccontextmanager
async def _pair(scheme: str, security: Any) -> AsyncIterator[Any]:
    """A client comm connected to an echo listener of ``scheme`` in this process."""
    tls = is_tls(scheme)
    listener = await listen(f"{scheme}://127.0.0.1:0", _echo,
                            **(security.get_listen_args("scheduler") if tls else {}))
    await listener.start()
    try:
        comm = await connect(listener.contact_address,
                             **(security.get_connection_args("client") if tls else {}))
        try:
            yield comm
        finally:
            await comm.close()
    finally:
        listener.stop()


async def _stock_nbytes(msg: object) -> int:
    _, _, total = _add_frames_header(await to_frames(msg))
    return total


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_counts(scheme: str, security: Any, counted: None) -> None:
    async with _pair(scheme, security) as comm:  # its echo server is counted too
        sent = [await comm.write(BATCH), await comm.write(SINGLE)]
        assert list(await comm.read()) == BATCH
        assert await comm.read() == SINGLE
        handshake = await _stock_nbytes(comm.handshake_info())
    c = counting.snapshot()
    # both ends are in this process: the client's and the echo server's calls,
    # and each end's handshake
    assert (c["writes"], c["write_msgs"]) == (2 + 4, 2 + 8)
    assert (c["reads"], c["read_msgs"]) == (2 + 4, 2 + 8)
    payload = await _stock_nbytes(BATCH) + await _stock_nbytes(SINGLE)
    assert sum(sent) == payload
    assert c["write_bytes"] == 2 * (payload + handshake)


def test_uninstall_gives_the_methods_back() -> None:
    from distributed.comm.tcp import TCP

    from asynciocomm.comm import AsyncioComm

    before = (TCP.read, TCP.write, AsyncioComm.read, AsyncioComm.write)
    counting.install()
    counting.install()  # idempotent
    assert TCP.read is not before[0]
    counting.uninstall()
    assert (TCP.read, TCP.write, AsyncioComm.read, AsyncioComm.write) == before

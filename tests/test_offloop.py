"""The off-loop TLS layer (``tls-thread``, :mod:`asynciocomm.offloop` and
:mod:`asynciocomm.tlsthread`): batching and flow control across the two threads,
and a real cluster over it. The conformance, differential and TLS tests run on
it as the ``asyncio+tls-thread`` variant (tests/variants.py)."""

from __future__ import annotations

import asyncio

import dask
import numpy as np
import pytest
from distributed import Client, Scheduler, Worker
from distributed.protocol import to_serialize

from asynciocomm.offloop import OffloopTransport, bridge_for
from asynciocomm.tlsthread import INFLIGHT_MAX, READ_BUDGET, io_thread
from tests.certs import Certs
from tests.helpers_net import WAIT
from tests.variants import VARIANTS, connect_to, serve

THREAD = next(v for v in VARIANTS if v.name == "asyncio+tls-thread")


@pytest.fixture(autouse=True)
def tls_thread():
    with THREAD.active():
        yield


async def test_a_burst_of_messages_arrives_in_few_wakeups(certs: Certs) -> None:
    """The thread hands plaintext over in batches: a burst of 2000 small
    messages wakes the loop far fewer times than once per message."""
    n = 2000
    got: asyncio.Future = asyncio.get_running_loop().create_future()

    async def reader(comm) -> None:
        bridge = bridge_for(asyncio.get_running_loop())
        before = bridge.wakeups
        for _ in range(n):
            await comm.read()
        got.set_result(bridge.wakeups - before)
        await comm.close()

    async with serve(THREAD, certs, reader) as listener:
        comm = await connect_to(THREAD, certs, listener.contact_address)
        assert isinstance(comm._protocol.transport, OffloopTransport)
        for i in range(n):
            await comm.write({"op": "x", "i": i})
        wakeups = await asyncio.wait_for(got, WAIT)
        await comm.close()
    # client and server share the loop (and the bridge): both sides' events count
    assert 0 < wakeups <= n // 4, wakeups


async def test_reading_stops_while_the_protocol_holds_too_much(certs: Certs) -> None:
    """Read flow control across the threads: with a protocol that reads nothing
    (its read-pause reached), the thread stops reading once INFLIGHT_MAX bytes
    wait on the loop side; everything still arrives, in order, afterwards."""
    release = asyncio.Event()
    seen: list[int] = []

    async def reader(comm) -> None:
        await release.wait()
        for i in range(24):
            msg = await comm.read()
            assert int(msg["x"][0]) == i % 256
            seen.append(i)
        await comm.close()

    with dask.config.set({"distributed.comm.asyncio.read-pause": "1MiB"}):
        async with serve(THREAD, certs, reader) as listener:
            comm = await connect_to(THREAD, certs, listener.contact_address)
            writes = asyncio.ensure_future(asyncio.gather(*(
                comm.write({"x": to_serialize(np.full(1 << 20, i % 256, dtype="u1"))})
                for i in range(24))))
            server_conn = None
            for _ in range(int(WAIT / 0.01)):
                conns = [t.conn for t in _transports() if t.conn is not comm._protocol.transport.conn]
                stalled = [c for c in conns if c is not None and c.stalled]
                if stalled:
                    server_conn = stalled[0]
                    break
                await asyncio.sleep(0.01)
            assert server_conn is not None, "the I/O thread never stopped reading"
            assert server_conn.undelivered <= INFLIGHT_MAX + READ_BUDGET + (256 << 10)
            assert not writes.done()  # the writer is held back, not buffering it all
            release.set()
            await asyncio.wait_for(writes, WAIT)
            for _ in range(int(WAIT / 0.01)):
                if len(seen) == 24:
                    break
                await asyncio.sleep(0.01)
            assert seen == list(range(24))
            await comm.close()


def _transports() -> list[OffloopTransport]:
    import gc

    return [o for o in gc.get_objects() if type(o) is OffloopTransport and not o.is_closing()]


def _io_thread_alive() -> bool:
    return io_thread().thread.is_alive()


@pytest.mark.slow
async def test_a_cluster_computes_over_it(certs: Certs) -> None:
    """Scheduler, two workers and a client in this process, every comm on the
    I/O thread's TLS; an exchange between the workers included."""
    sec = certs.security()
    async with Scheduler(protocol="asyncio+tls", security=sec, dashboard_address=":0") as s:
        async with Worker(s.address, security=sec, nthreads=1) as a, \
                Worker(s.address, security=sec, nthreads=1) as b, \
                Client(s.address, security=sec, asynchronous=True) as c:
            x = c.submit(np.arange, 1_000_000, workers=[a.address])
            y = c.submit(np.ones, 1_000_000, workers=[b.address])
            total = c.submit(lambda p, q: float((p + q).sum()), x, y, workers=[a.address])
            assert await asyncio.wait_for(total, WAIT) == float(
                np.arange(1_000_000).sum() + 1_000_000)
            assert s.address.startswith("asyncio+tls://")
            transports = [bs.comm._protocol.transport for bs in s.stream_comms.values()]
            assert transports and all(type(t) is OffloopTransport for t in transports)
    assert _io_thread_alive()

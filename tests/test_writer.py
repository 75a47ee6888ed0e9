"""The write side (asynciocomm.writer): when a message is handed to the
transport, and how many transport calls a burst of messages costs.

Over real sockets, for asyncio and asyncio+tls on both loops. A ``WriteSpy``
stands in for the transport the comm's sender writes to and records every write
call; nothing is mocked below it.
"""

from __future__ import annotations

import asyncio

import pytest
from distributed.comm.core import CommClosedError

from tests.helpers_net import WAIT, write_spy
from tests.variants import OWN, connect_to, serve, variant_fixture

variant = variant_fixture(OWN)


async def test_a_lone_write_reaches_the_transport_before_the_loop_turns(
    variant, certs
) -> None:
    """Request/response: each write() hands its message to the transport before
    it returns, not one loop iteration later, because nothing else is waiting to
    go. Checked on every round, right after write() returns without yielding."""
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        try:
            with write_spy(comm) as spy:
                for i in range(20):
                    await comm.write({"op": "ping", "i": i})
                    assert len(spy.sizes) == i + 1, spy.sizes
                    assert await asyncio.wait_for(comm.read(), WAIT) == {"op": "ping", "i": i}
        finally:
            await comm.close()


async def test_a_burst_of_writes_costs_two_transport_calls(variant, certs) -> None:
    """200 small messages written in one loop iteration: the first leaves at once,
    the other 199 leave together in one call when the loop turns. All arrive, in
    order."""
    n = 200
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        try:
            with write_spy(comm) as spy:
                for i in range(n):
                    await comm.write({"i": i})  # never yields: under the high-water mark
                assert len(spy.sizes) == 1
                got = [await asyncio.wait_for(comm.read(), WAIT) for _ in range(n)]
                assert got == [{"i": i} for i in range(n)]
                assert len(spy.sizes) == 2, spy.sizes
        finally:
            await comm.close()


async def test_a_burst_of_data_messages_in_the_fewest_transport_calls(
    variant, certs
) -> None:
    """A first data message leaves at once; the messages written after it in the
    same loop iteration (each data message, 64 KiB that stays a reference, is
    followed by three small ones) leave together when the loop turns. How that
    batch goes depends on the transport (write_mode):

    * TLS, on either loop: one writelines call, one ciphertext send, with each
      run of small buffers joined first (each buffer is at least one record);
    * uvloop's TCP transport: one writelines call (one writev), as it is;
    * asyncio's TCP transport, which would join a list into a copy: one write
      per run of small buffers and one per large frame.

    All messages arrive intact, in order."""
    from distributed.protocol.serialize import to_serialize

    n, size, coalesce = 10, 64 * 1024, 16 * 1024
    payloads = [bytes([i]) * size for i in range(n)]
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        assert comm._protocol._coalesce == coalesce  # the configured default
        uvloop = type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        try:
            with write_spy(comm) as spy:
                for i in range(n):
                    await comm.write({"i": i, "p": to_serialize(payloads[i])})
                    for j in range(3):
                        await comm.write({"i": i, "j": j})
                first = spy.calls[:]
                got = [await asyncio.wait_for(comm.read(), WAIT) for _ in range(4 * n)]
                data = [m for m in got if "p" in m]
                assert [m["i"] for m in data] == list(range(n))
                assert all(bytes(m["p"]) == payloads[m["i"]] for m in data)
                assert [(m["i"], m["j"]) for m in got if "j" in m] == [
                    (i, j) for i in range(n) for j in range(3)
                ]
                assert sum(nb for _, call in first for nb in call) > size  # went through
                batch = spy.calls[len(first):]
                sizes = [nb for _, call in batch for nb in call]
                assert sizes.count(size) == n - 1  # the large frames, never joined
                small = [nb < coalesce for nb in sizes]
                runs_joined = not any(a and b for a, b in zip(small, small[1:]))
                if variant.tls:
                    assert [method for method, _ in batch] == ["writelines"]
                    assert runs_joined, sizes
                elif uvloop:
                    assert [method for method, _ in batch] == ["writelines"]
                    assert not runs_joined  # writev takes the pieces as they are
                else:
                    assert {method for method, _ in batch} == {"write"}
                    assert runs_joined, sizes
                    assert len(batch) == len(sizes) == 2 * (n - 1) + 1
        finally:
            await comm.close()


@pytest.mark.parametrize("size", [16 * 1024, 32 * 1024, 64 * 1024])
async def test_large_messages_over_tls_are_never_batched(variant, certs, size) -> None:
    """A burst of data messages and nothing else: over TLS each one from
    TLS_WRITE_THROUGH_MIN (32 KiB) up reaches the transport before its write()
    returns (batching them would only encrypt a whole batch into one buffer);
    smaller ones, and every one on plain TCP, batch as usual. All arrive intact,
    in order."""
    from distributed.protocol.serialize import to_serialize

    from asynciocomm.transport_traits import TLS_WRITE_THROUGH_MIN

    n = 8
    payloads = [bytes([i]) * size for i in range(n)]
    async with serve(variant, certs) as listener:
        comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
        try:
            with write_spy(comm) as spy:
                calls_after = []
                for i in range(n):
                    await comm.write({"i": i, "p": to_serialize(payloads[i])})
                    calls_after.append(len(spy.calls))
                got = [await asyncio.wait_for(comm.read(), WAIT) for _ in range(n)]
                assert [(m["i"], bytes(m["p"])) for m in got] == list(enumerate(payloads))
                assert calls_after[0] > 0  # the first one went through
                if variant.tls and size >= TLS_WRITE_THROUGH_MIN:
                    assert calls_after == [calls_after[0] * (i + 1) for i in range(n)]
                else:
                    assert calls_after == [calls_after[0]] * n  # the rest were batched
        finally:
            await comm.close()


async def test_write_on_a_transport_closed_underneath_is_a_comm_error(
    variant, certs
) -> None:
    """The transport is closed behind the comm's back (as an OS error closes it
    before connection_lost is reported): the next write either raises
    CommClosedError or is dropped with the connection, the read after it raises
    CommClosedError, and nothing reaches the loop's exception handler."""
    loop = asyncio.get_running_loop()
    errors: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        async with serve(variant, certs) as listener:
            comm = await connect_to(variant, certs, listener.contact_address, timeout=WAIT)
            for _ in range(2):  # a write straight through, then one batched
                comm._protocol.transport.close()
                try:
                    await comm.write({"op": "late"})
                    await comm.write({"op": "later"})
                except CommClosedError:
                    pass
            with pytest.raises(CommClosedError):
                await asyncio.wait_for(comm.read(), WAIT)
            await comm.close()
    finally:
        loop.set_exception_handler(None)
    assert not errors, errors

"""Cyclic garbage per closed connection.

Stock tcp leaves none. asynciocomm leaves none on uvloop. On the plain asyncio
loop before Python 3.12 it leaves 7 objects per side: CPython's selector
transport keeps ``_read_ready_cb``, a bound method of itself, that its
``close()`` clears only from 3.12 on (gh-100348). No public transport method
breaks that cycle (``set_protocol`` sets the bound method again), so asynciocomm
leaves it to the collector: one connection is many tasks, so per task this is
nothing on a scheduler's long-lived connections.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections import Counter

from distributed.comm import connect, listen

N = 50
#: The transport's objects in its cycle: itself, the bound method, its extra
#: info (a dict, the TransportSocket, the closed socket, two addresses). On
#: CPython 3.10 the cycle holds one dict more per transport (measured: 200 dicts
#: for 100 transports, everything else as on 3.11).
SELECTOR_CYCLE = Counter({"_SelectorSocketTransport": 1, "method": 1,
                          "dict": 2 if sys.version_info < (3, 11) else 1,
                          "TransportSocket": 1, "socket": 1, "tuple": 2})


async def _garbage_per_connection(scheme: str) -> Counter[str]:
    closed = asyncio.Queue()

    async def handle(comm) -> None:
        await comm.read()
        await comm.close()
        await closed.put(None)

    async with listen(f"{scheme}://127.0.0.1", handle) as listener:
        async def one() -> None:
            comm = await connect(listener.contact_address)
            await comm.write("x")
            await closed.get()
            await comm.close()

        # Warm-up: first-use caches are not per-connection garbage, and what an
        # earlier test left (tornado drops its IOLoop of a closed event loop when
        # the next one starts) is freed before the window that counts.
        for _ in range(5):
            await one()
        found: Counter[str] = Counter()
        for _window in range(2):  # the second window counts
            gc.collect()
            gc.disable()
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                for _ in range(N):
                    await one()
                gc.collect()
                found = Counter(type(o).__name__ for o in gc.garbage)
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()
    return found


async def test_closed_connections_leave_the_selector_transports_cycle_only(loop_name):
    assert await _garbage_per_connection("tcp") == Counter()
    ours = await _garbage_per_connection("asyncio")
    if loop_name == "uvloop" or sys.version_info >= (3, 12):
        assert ours == Counter()
    else:
        both_sides = Counter({t: 2 * N * n for t, n in SELECTOR_CYCLE.items()})
        assert ours == both_sides

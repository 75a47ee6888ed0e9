"""Integrity soak: 16 concurrent comms carry random message shapes and sizes
(empty, tiny, dicts, numpy arrays up to 4 MiB in CI) with a blake2b checksum over
sequence number, comm id and payload on every message, verified by the server
and again on the echo. Then each comm asks for a burst written right before the
server's ``close()``. Zero lost, reordered or corrupted.

The long run (gigabytes, messages up to 256 MiB) is
``python -m tests.reliability --only soak --soak-bytes 4GiB --soak-max 256MiB``.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.peers.conn import connect_args, roundtrip, serve
from tests.peers.soak import soak, soak_handler
from tests.reliability._util import REL, hygiene, params, security


@pytest.mark.parametrize("variant", params(REL))
async def test_integrity_soak(variant, certs) -> None:
    sec = security(variant, certs)
    async with hygiene() as h:
        async with serve(variant.scheme, soak_handler, sec) as listener:
            await asyncio.get_running_loop().run_in_executor(None, lambda: None)
            await roundtrip(listener.contact_address, connect_args(sec), n=1)
            h.mark_fds()
            res = await soak(listener.contact_address, connect_args(sec), comms=16,
                             messages=30, max_size=4 << 20, seed=11, burst=8,
                             window=3, deadline=120)
    print(res.as_dict())
    assert res.problems == [], res.problems
    assert res.messages == 16 * (30 + 8)
    assert res.lost == res.reordered == res.corrupted == 0

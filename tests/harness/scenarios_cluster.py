"""Cluster scenarios under ``gen_cluster`` (its leak checks: threads, processes,
instances, file descriptors), on whichever comm serves ``tcp://`` and ``tls://``:
the shapes of distributed's own tests that failed through a leaked thread (large
messages, compression, transfers broken up into several messages, large graph
arguments), and a restart through nannies."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from distributed import Nanny, wait
from distributed.utils_test import captured_logger, gen_cluster, inc

from tests.harness.conftest import security


@gen_cluster(client=True)
async def test_large_arguments_and_results(c, s, a, b) -> None:
    x = np.arange(12 << 20, dtype="u1")
    future = c.submit(lambda v: v[::-1].copy(), x, workers=[a.address])
    got = await c.submit(lambda v: v.sum(dtype="u8"), future, workers=[b.address])
    assert got == x.sum(dtype="u8")


@gen_cluster(client=True, config={"distributed.comm.compression": "zlib"})
async def test_compressed_transfers(c, s, a, b) -> None:
    x = np.zeros(4 << 20, dtype="u1")  # compresses well
    future = c.submit(lambda v: v + 1, x, workers=[a.address])
    assert (await c.submit(lambda v: int(v.sum()), future, workers=[b.address])) == x.size


@gen_cluster(client=True, config={"distributed.worker.transfer.message-bytes-limit": "1 MiB"})
async def test_a_transfer_broken_into_several_messages(c, s, a, b) -> None:
    parts = c.map(lambda i: np.full(256 << 10, i % 251, dtype="u1"), range(24),
                  workers=[a.address])
    await wait(parts)
    total = c.submit(lambda *xs: sum(int(x[0]) for x in xs), *parts, workers=[b.address])
    assert await total == sum(i % 251 for i in range(24))


def _plus_sum(i: int, arr: np.ndarray) -> int:
    return int(i + arr.sum())


@gen_cluster(client=True)
async def test_large_arguments_in_the_graph(c, s, a, b) -> None:
    big = np.ones(2 << 20, dtype="u1")
    futures = [c.submit(_plus_sum, i, big) for i in range(20)]
    assert await c.gather(futures) == [i + big.size for i in range(20)]


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_restart_through_nannies_drops_no_comm_dangling(tls: bool) -> None:
    @gen_cluster(client=True, Worker=Nanny, nthreads=[("127.0.0.1", 1)] * 2,
                 security=security() if tls else None)
    async def scenario(c, s, a, b) -> None:
        with captured_logger("distributed.comm", level=logging.WARNING) as log:
            assert await c.submit(inc, 1) == 2
            for _ in range(2):
                await c.restart()
            assert await c.submit(inc, 2) == 3
        assert "dangling" not in log.getvalue(), log.getvalue()

    scenario()

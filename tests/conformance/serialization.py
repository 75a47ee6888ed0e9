"""Conformance checks of serialization as a distributed cluster sees it: how
often a task's argument is pickled, and the fine performance metrics a worker
records for a transfer, with distributed's offload threshold as it is at the
time (distributed reads ``distributed.comm.utils.OFFLOAD_THRESHOLD`` at each
message, and its own tests lower it at run time)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import distributed.comm.utils
import numpy as np
from distributed import Client, Scheduler, Worker, wait
from distributed.protocol.pickle import dumps

from tests.certs import Certs
from tests.helpers_pickles import Pickles, f, main_class
from tests.variants import Variant

#: Upper bound for any single wait in these checks (a hang fails, never blocks CI).
WAIT = 30


@contextlib.asynccontextmanager
async def _cluster(variant: Variant, certs: Certs,
                   n_workers: int) -> AsyncIterator[tuple[Client, list[Worker]]]:
    """A scheduler, ``n_workers`` workers and a client in this process, on ``variant``."""
    security = certs.security() if variant.tls else None
    async with Scheduler(protocol=variant.scheme, host="127.0.0.1", dashboard_address=":0",
                         security=security) as s:
        async with contextlib.AsyncExitStack() as stack:
            workers = [
                await stack.enter_async_context(Worker(s.address, nthreads=1, security=security))
                for _ in range(n_workers)]
            client = await stack.enter_async_context(
                Client(s.address, asynchronous=True, security=security))
            yield client, workers


async def check_submit_pickles_an_argument_as_stock(variant: Variant, certs: Certs) -> None:
    """``client.submit(f, x, x)`` with ``x`` of a class of a script: the
    scheduler pickles the task for the worker as distributed's pickle.dumps
    pickles ``x`` once: with pickle, then with cloudpickle (``__main__`` is in
    the bytes), twice; not three times."""
    async with _cluster(variant, certs, 1) as (client, _):
        with main_class() as cls:
            x = cls(3)
            start = Pickles.n
            dumps(x)
            once = Pickles.n - start
            start = Pickles.n
            future = client.submit(f, x, x)
            submitted = Pickles.n - start  # the client's, within submit()
            assert await asyncio.wait_for(future, WAIT) == 6
            forwarded = Pickles.n - start - submitted  # the scheduler's, for the worker
    assert (once, forwarded) == (2, 2), (once, submitted, forwarded)
    assert submitted >= once


def _make(n: int) -> np.ndarray:
    return np.arange(n)


def _use(a: np.ndarray) -> int:
    return int(a.sum())


def _transfer_keys(worker: Worker) -> set[tuple[Any, ...]]:
    return {k for k in worker.digests_total if k[0] in ("get-data", "gather-dep")}


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(WAIT * 100):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise TimeoutError


#: What a transfer of one array from worker A to worker B makes each record.
SENDER = {("get-data", "memory-read", "bytes"), ("get-data", "memory-read", "count")} | {
    ("get-data", step, "seconds") for step in ("serialize", "compress", "network")}
RECEIVER = {("gather-dep", step, "seconds")
            for step in ("decompress", "deserialize", "network", "other")}
#: What each adds when every message is over the threshold (both offload their reads).
OFFLOADED = ({("get-data", "offload", "seconds")}, {("gather-dep", "offload", "seconds")})


@contextlib.contextmanager
def offload_threshold(value: Any) -> Iterator[None]:
    """distributed's offload threshold set to ``value`` while the block runs."""
    saved = distributed.comm.utils.OFFLOAD_THRESHOLD
    distributed.comm.utils.OFFLOAD_THRESHOLD = value
    try:
        yield
    finally:
        distributed.comm.utils.OFFLOAD_THRESHOLD = saved


async def transfer_metric_keys(client: Client, a: Worker, b: Worker) -> tuple[set[Any], set[Any]]:
    """The metric keys worker ``a`` (get-data) and ``b`` (gather-dep) record
    for one array moved from ``a`` to ``b``."""
    source = client.submit(_make, 100_000, workers=[a.address], pure=False)
    await asyncio.wait_for(wait(source), WAIT)
    a.digests_total.clear()
    b.digests_total.clear()
    used = client.submit(_use, source, workers=[b.address], pure=False)
    await asyncio.wait_for(wait(used), WAIT)
    # The sender's last step is its network meter: reading the receiver's "OK".
    await _until(lambda: ("get-data", "network", "seconds") in a.digests_total
                 and a.transfer_outgoing_count == 0)
    return _transfer_keys(a), _transfer_keys(b)


async def check_transfer_metrics_follow_the_live_offload_threshold(
        variant: Variant, certs: Certs) -> None:
    async with _cluster(variant, certs, 2) as (client, (a, b)):
        assert await transfer_metric_keys(client, a, b) == (SENDER, RECEIVER)
        with offload_threshold(1):
            keys = await transfer_metric_keys(client, a, b)
        assert keys == (SENDER | OFFLOADED[0], RECEIVER | OFFLOADED[1]), keys

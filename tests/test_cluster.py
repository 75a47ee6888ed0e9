"""End to end: real schedulers, nannies and worker processes on asynciocomm.

Each test runs once per event loop: ``distributed.admin.event-loop`` is set for
LocalCluster (the nannies pass the config on to their workers) and through
DASK_DISTRIBUTED__ADMIN__EVENT_LOOP for CLI subprocesses; the workers report the
loop they run on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from operator import add

import dask
import dask.array as da
import dask.bag as db
import numpy as np
import pytest
from distributed import Client, LocalCluster, Nanny
from distributed.utils_test import poll_for

from tests.helpers_proc import dask_processes, logs, start_scheduler, start_worker

pytestmark = pytest.mark.slow

LOOPS = ["asyncio", "uvloop"]
WAIT = 90


async def _loop_module() -> str:
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def _tcp_module() -> str:
    import distributed

    return type(distributed.comm.registry.backends["tcp"]).__module__


def _transfers_in(dask_worker) -> int:
    return dask_worker.state.transfer_incoming_count_total


def _listener_modules(dask_worker) -> list[str]:
    return [type(listener).__module__ for listener in dask_worker.listeners]


def _compute_and_check(c: Client) -> None:
    """A reduction, and two all-to-all exchanges (every output chunk needs data
    from every worker): a transpose-add and a task-based bag groupby."""
    x = da.random.default_rng(0).random((2000, 2000), chunks=200)
    x = x.persist()
    xn = x.compute()
    assert np.isclose(x.sum().compute(), xn.sum())
    assert np.allclose((x + x.T).sum(axis=0).compute(), (xn + xn.T).sum(axis=0))
    assert np.allclose(x.rechunk((2000, 50)).mean(axis=0).compute(), xn.mean(axis=0))
    bag = db.from_sequence(range(20_000), npartitions=16)
    grouped = dict(
        bag.groupby(lambda i: i % 13, shuffle="tasks")
        .map(lambda kv: (kv[0], sum(kv[1])))
        .compute()
    )
    expected: dict[int, int] = {}
    for i in range(20_000):
        expected[i % 13] = expected.get(i % 13, 0) + i
    assert grouped == expected
    assert c.submit(add, 1, 2).result(timeout=WAIT) == 3


def _check_workers(c: Client, scheme: str, loop: str, n: int) -> dict[str, int]:
    c.wait_for_workers(n, timeout=WAIT)
    workers = c.scheduler_info()["workers"]
    assert len(workers) == n and all(a.startswith(f"{scheme}://") for a in workers), workers
    assert set(c.run(_loop_module).values()) == {loop}
    return c.run(os.getpid)


@pytest.mark.parametrize("loop", LOOPS)
def test_localcluster_asyncio_with_nanny_restart(loop) -> None:
    with dask.config.set({"distributed.admin.event-loop": loop}):
        with LocalCluster(
            protocol="asyncio", n_workers=2, threads_per_worker=1, processes=True,
            dashboard_address=":0",
        ) as cluster, Client(cluster, timeout=WAIT) as c:  # fmt: skip
            assert cluster.scheduler_address.startswith("asyncio://")
            assert all(isinstance(w, Nanny) for w in cluster.workers.values())
            pids = _check_workers(c, "asyncio", loop, 2)
            _compute_and_check(c)
            assert all(n > 0 for n in c.run(_transfers_in).values())

            # A restart through the nannies: new worker processes, same cluster.
            c.restart(timeout=WAIT)
            new_pids = _check_workers(c, "asyncio", loop, 2)
            assert set(new_pids.values()).isdisjoint(pids.values())
            _compute_and_check(c)

            # One worker alone, through its nanny.
            one = next(iter(new_pids))
            c.restart_workers([one], timeout=WAIT)
            # The scheduler drops the old worker when its connection ends, which
            # restart_workers does not wait for: distributed 2024.12's nanny reports
            # the kill once the join has used up the timeout's rest, even with the
            # process not gone yet (then c.run reaches a dead address).
            poll_for(lambda: one not in c.scheduler_info()["workers"], timeout=WAIT)
            after = _check_workers(c, "asyncio", loop, 2)
            assert new_pids[one] not in after.values()
            assert c.submit(sum, range(10), pure=False).result(timeout=WAIT) == 45


@pytest.mark.parametrize("loop", LOOPS)
def test_localcluster_asyncio_tls(loop, certs) -> None:
    security = certs.security()
    with dask.config.set({"distributed.admin.event-loop": loop}):
        with LocalCluster(
            protocol="asyncio+tls", n_workers=2, threads_per_worker=1, processes=True,
            security=security, dashboard_address=":0",
        ) as cluster, Client(cluster, security=security, timeout=WAIT) as c:  # fmt: skip
            assert cluster.scheduler_address.startswith("asyncio+tls://")
            _check_workers(c, "asyncio+tls", loop, 2)
            _compute_and_check(c)
            # The workers' comms really are encrypted, with the peer verified.
            infos = c.run(
                lambda dask_worker: [
                    sorted(comm.extra_info)
                    for comms in dask_worker.rpc.occupied.values()
                    for comm in comms
                ]
                + [sorted(dask_worker.batched_stream.comm.extra_info)]
            )
            for per_worker in infos.values():
                assert ["cipher", "peercert"] in per_worker


@pytest.mark.parametrize("loop", LOOPS)
def test_cli_scheduler_and_workers(loop, tmp_path) -> None:
    with dask_processes() as procs:
        try:
            address = start_scheduler(procs, tmp_path, loop, "--protocol", "asyncio")
            assert address.startswith("asyncio://")
            for _ in range(2):
                start_worker(procs, tmp_path, loop, address)
            with dask.config.set({"distributed.admin.event-loop": loop}):
                with Client(address, timeout=WAIT) as c:
                    _check_workers(c, "asyncio", loop, 2)
                    _compute_and_check(c)
        except BaseException:
            print(logs(procs))
            raise


def _worker_names(dask_scheduler) -> dict:
    return {ws.name: addr for addr, ws in dask_scheduler.workers.items()}


@pytest.mark.parametrize("loop", LOOPS)
def test_mixed_takeover_cluster(loop, tmp_path) -> None:
    """A takeover scheduler (--preload) on tcp://, one stock worker and one takeover
    worker (worker and nanny preloads), and a stock client: all interoperate."""
    with dask_processes() as procs:
        try:
            address = start_scheduler(
                procs, tmp_path, loop, "--protocol", "tcp", "--preload", "asynciocomm.preload"
            )
            assert address.startswith("tcp://")
            start_worker(procs, tmp_path, loop, address, "--name", "stock")
            start_worker(
                procs, tmp_path, loop, address, "--name", "takeover",
                "--preload", "asynciocomm.preload", "--preload-nanny", "asynciocomm.preload",
            )  # fmt: skip
            with dask.config.set({"distributed.admin.event-loop": loop}):
                with Client(address, timeout=WAIT) as c:
                    _check_workers(c, "tcp", loop, 2)
                    assert c.run_on_scheduler(_tcp_module) == "asynciocomm.backend"
                    # From the scheduler itself: the client's cached
                    # scheduler_info() may predate the second registration.
                    by_name = c.run_on_scheduler(_worker_names)
                    modules = c.run(_tcp_module)
                    assert modules[by_name["stock"]] == "distributed.comm.tcp"
                    assert modules[by_name["takeover"]] == "asynciocomm.backend"
                    listeners = c.run(_listener_modules)
                    assert listeners[by_name["stock"]] == ["distributed.comm.tcp"]
                    assert listeners[by_name["takeover"]] == ["asynciocomm.listener"]
                    _compute_and_check(c)
                    # Both workers fetched data from the other (stock <-> takeover).
                    assert all(n > 0 for n in c.run(_transfers_in).values())
        except BaseException:
            print(logs(procs))
            raise


@contextlib.contextmanager
def _two_workers(protocol: str, loop: str) -> Iterator[tuple[Client, str, str]]:
    """A client of a LocalCluster with two single-threaded worker processes on
    ``protocol`` and ``loop``, and the two workers' addresses, sorted."""
    with dask.config.set({"distributed.admin.event-loop": loop}):
        with LocalCluster(
            protocol=protocol, n_workers=2, threads_per_worker=1, processes=True,
            dashboard_address=":0",
        ) as cluster, Client(cluster, timeout=WAIT) as c:  # fmt: skip
            a, b = sorted(_check_workers(c, protocol, loop, 2))
            yield c, a, b


def _pool_hits() -> int:
    from asynciocomm import pool

    return sum(p.hits for p in pool._pools.values())


def _filled(i: int, n: int) -> np.ndarray:
    return np.full(n, i, dtype="f8")


def _same(x: np.ndarray) -> np.ndarray:
    return x  # the result is the received array itself, held by the worker


def _all_equal(x: np.ndarray, i: int) -> bool:
    return bool((x == i).all())


@pytest.mark.parametrize("loop", LOOPS)
def test_reused_receive_buffers_between_workers(loop) -> None:
    """6 MiB arrays move from worker A to worker B, whose comm receives them into
    pooled buffers. B keeps every third one (a task returns the received array
    itself); the rest are released and their buffers reused. At the end every
    kept array still holds its own values, and B's pool was hit."""
    n = 6 * 2**20 // 8
    with _two_workers("asyncio", loop) as (c, a, b):
        kept = []
        for i in range(12):
            src = c.submit(_filled, i, n, workers=[a], pure=False)
            got = c.submit(_same, src, workers=[b], pure=False)
            assert c.submit(_all_equal, got, i, workers=[b]).result(timeout=WAIT)
            if i % 3 == 0:
                kept.append((i, got))
            del src, got
        for i, fut in kept:
            assert c.submit(_all_equal, fut, i, workers=[b]).result(timeout=WAIT), i
        assert c.run(_pool_hits, workers=[b])[b] > 0


_TRANSFER_STEPS = {"serialize", "compress", "decompress", "deserialize"}


def _transfer_metrics(dask_worker) -> list:
    """The worker's fine performance metrics of its transfers' (de)serialization."""
    return sorted(
        k for k in dask_worker.digests_total
        if isinstance(k, tuple) and k[0] in ("get-data", "gather-dep") and k[1] in _TRANSFER_STEPS
    )


def _transfers_with_metrics(protocol: str, loop: str) -> dict[str, list]:
    with _two_workers(protocol, loop) as (c, a, b):
        src = c.submit(_filled, 1, 100_000, workers=[a], pure=False)
        got = c.submit(_same, src, workers=[b], pure=False)
        assert c.submit(_all_equal, got, 1, workers=[b]).result(timeout=WAIT)
        return {"sender": c.run(_transfer_metrics, workers=[a])[a],
                "receiver": c.run(_transfer_metrics, workers=[b])[b]}


@pytest.mark.parametrize("loop", LOOPS)
def test_transfer_metrics_as_with_tcp(loop) -> None:
    """Worker transfers report the same fine performance metrics (get-data's
    serialize and compress, gather-dep's decompress and deserialize) as over the
    stock tcp comm: where a callback listens, nothing is skipped."""
    ours = _transfers_with_metrics("asyncio", loop)
    theirs = _transfers_with_metrics("tcp", loop)
    assert ours == theirs
    assert {k[1] for k in ours["sender"]} >= {"serialize", "compress"}
    assert {k[1] for k in ours["receiver"]} >= {"decompress", "deserialize"}

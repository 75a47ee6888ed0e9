"""A stock-distributed peer for the interop tests, run in a separate process:

    python -m tests.helpers_stock_peer server      # echo server; prints its address
    python -m tests.helpers_stock_peer client ADDR # sends MESSAGES, checks the echoes
    python -m tests.helpers_stock_peer cluster-client ADDR  # a stock Client

It never imports asynciocomm: ``tcp://`` is distributed's own Tornado comm here,
and it checks that. The event loop follows ``distributed.admin.event-loop`` (set
by the parent through DASK_DISTRIBUTED__ADMIN__EVENT_LOOP).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import numpy as np
from distributed.protocol import Serialized, deserialize, serialize, to_serialize

from tests.peers.conn import echo  # noqa: F401  (shared echo handler)

WAIT = 60


def messages() -> list[Any]:
    """Message shapes both directions exchange (deterministic)."""
    rng = np.random.default_rng(3)
    arr = rng.random(100_000)
    return [
        {"op": "ping"},
        {"op": "nested", "x": {"a": [1, 2.5, "s", None, b"bytes", (1, 2)]}},
        {"pickled": to_serialize(complex(1, 2)), "fn": to_serialize(len)},
        {"array": to_serialize(arr), "strided": to_serialize(arr[::3])},
        {"2d": to_serialize(rng.integers(0, 1000, (300, 400)))},
        {"fortran": to_serialize(np.asfortranarray(rng.random((100, 70))))},
        {"ser": Serialized(*serialize(b"precomputed"))},
        {"empty": to_serialize(b""), "empty_arr": to_serialize(np.empty(0))},
        {"tiny": [to_serialize(np.full(2, i)) for i in range(3000)]},
        {"bytes": b"b" * 300_000, "ba": to_serialize(bytearray(b"q" * 200_000))},
        # Large frames: above distributed's 64 MiB shard size, so split in frames.
        {"big": to_serialize(rng.integers(0, 256, 100 * 2**20, dtype="u1"))},
        {"big2": to_serialize(np.arange(5 * 2**20, dtype="f8"))},
        [1, 2, 3],
        "a string",
    ]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, Serialized):
        a = deserialize(a.header, a.frames)
    if isinstance(b, Serialized):
        b = deserialize(b.header, b.frames)
    if type(a).__name__ == "Serialize":
        return same(a.data, b)
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool((a == b).all())
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (bytes, bytearray)):
        return bytes(a) == bytes(b)
    return a == b


def loop_kind() -> str:
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def assert_stock() -> str:
    import distributed.comm.registry as registry

    assert "asynciocomm" not in sys.modules, "the stock peer imported asynciocomm"
    module = type(registry.get_backend("tcp")).__module__
    assert module == "distributed.comm.tcp", module
    return module


async def exchange(comm: Any) -> int:
    """Send every message; check each echo."""
    n = 0
    for msg in messages():
        await comm.write(msg)
        got = await asyncio.wait_for(comm.read(), WAIT)
        assert same(msg, got), f"message {n} differs"
        n += 1
    return n


async def server() -> None:
    from distributed.comm import listen

    assert_stock()
    listener = listen("tcp://127.0.0.1:0", echo)
    await listener.start()
    print(
        json.dumps(
            {"address": listener.contact_address, "comm": assert_stock(), "loop": loop_kind()}
        ),
        flush=True,
    )
    # Serve until the parent closes our stdin.
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    listener.stop()


async def client(address: str) -> None:
    from distributed.comm import connect

    comm = await connect(address, timeout=WAIT)
    assert type(comm).__module__ == "distributed.comm.tcp", type(comm)
    n = await exchange(comm)
    await comm.close()
    print(
        json.dumps({"exchanged": n, "comm": assert_stock(), "loop": loop_kind()}), flush=True
    )


def cluster_client(address: str) -> None:
    import dask.array as da
    from distributed import Client

    with Client(address, timeout=WAIT) as c:
        x = da.ones((1000, 1000), chunks=100)
        total = int((x + x.T).sum().compute())
        big = c.submit(np.arange, 3_000_000).result()
        remote = c.run_on_scheduler(
            lambda: type(__import__("distributed").comm.registry.backends["tcp"]).__module__
        )
        workers = c.run(
            lambda: type(__import__("distributed").comm.registry.backends["tcp"]).__module__
        )
        print(
            json.dumps(
                {
                    "total": total,
                    "big_sum": int(big.sum()),
                    "scheduler_comm": remote,
                    "worker_comms": sorted(workers.values()),
                    "comm": assert_stock(),
                }
            ),
            flush=True,
        )


def main() -> None:
    from distributed.compatibility import asyncio_run
    from distributed.config import get_loop_factory

    mode = sys.argv[1]
    if mode == "cluster-client":
        cluster_client(sys.argv[2])
        return
    coro = server() if mode == "server" else client(sys.argv[2])
    asyncio_run(coro, loop_factory=get_loop_factory())


if __name__ == "__main__":
    main()

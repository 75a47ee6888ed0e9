"""Evidence for 0008: the cost of pickling the type in every dask_dumps.

Run it once against a tree with the patches before 0008 and once with 0008:

    PYTHONPATH=/path/to/distributed-2026.8.0 python patches/evidence/type_pickle_bench.py

It prints, best of 7 timing loops:
- ``pickle.dumps(numpy.ndarray)`` with distributed's pickle (what 0008 caches);
- ``dask_dumps`` of a 64 KiB uint8 array and of a 10-element float array;
- ``serialize_and_split`` of ``Serialize(64 KiB array)``;
- ``to_frames`` of ``{"op": "s", "p": to_serialize(64 KiB uint8)}``, the message
  of asynciocomm-bench's 64 KiB bulk test (compression off).

With ``--registered``, a module made for the run (not numpy's) is registered
with ``cloudpickle.register_pickle_by_value`` first, as a user shipping local
code to workers does: the first draft of 0008 turned its cache off then.
"""

from __future__ import annotations

import asyncio
import sys
import time
import types
import timeit

import cloudpickle
import distributed
import numpy as np
from distributed.comm.utils import to_frames
from distributed.protocol import pickle as dask_pickle
from distributed.protocol.serialize import (
    Serialize,
    dask_dumps,
    serialize_and_split,
    to_serialize,
)


def per_call_us(fn, number: int = 50_000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main() -> None:
    print(f"distributed from {distributed.__file__}")
    if "--registered" in sys.argv[1:]:
        local = types.ModuleType("type_pickle_bench_local_code")
        sys.modules[local.__name__] = local
        cloudpickle.register_pickle_by_value(local)
    print(f"registered by value: {sorted(cloudpickle.list_registry_pickle_by_value())}")
    big = np.random.default_rng(1).integers(0, 255, 65536, dtype=np.uint8)
    small = np.arange(10, dtype="f8")
    ctx = {"sender": {}, "recipient": {}, "compression": None}
    print(f"pickle.dumps(ndarray):        {per_call_us(lambda: dask_pickle.dumps(np.ndarray)):.2f} us")
    print(f"dask_dumps, 64 KiB array:     {per_call_us(lambda: dask_dumps(big, ctx)):.2f} us")
    print(f"dask_dumps, 10 floats:        {per_call_us(lambda: dask_dumps(small, ctx)):.2f} us")
    wrapped = Serialize(big)
    print("serialize_and_split, 64 KiB: "
          f"{per_call_us(lambda: serialize_and_split(wrapped, None, 'message', ctx, 2**26)):.2f} us")

    msg = {"op": "s", "p": to_serialize(big)}
    loop = asyncio.new_event_loop()

    async def write(n: int) -> None:
        for _ in range(n):
            await to_frames(msg, allow_offload=True, context=ctx, frame_split_size=2**26)

    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        loop.run_until_complete(write(1000))
        best = min(best, time.perf_counter() - t0)
    print(f"to_frames (64 KiB array):     {best / 1000 * 1e6:.1f} us")
    loop.close()


if __name__ == "__main__":
    main()

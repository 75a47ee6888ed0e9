"""Evidence for 0007: the cost of ContextMeter.meter, and of the data path around it.

Run it once against a pristine and once against a patched distributed tree:

    PYTHONPATH=/path/to/distributed-2026.8.0 python patches/evidence/context_meter_bench.py

It prints, best of 7 timing loops:
- a ``@context_meter.meter`` decorated no-op, with no callback and with one listening;
- a ``with context_meter.meter(...)`` block;
- ``to_frames`` and ``from_frames`` of ``{"op": "s", "p": to_serialize(64 KiB uint8)}``,
  the message of asynciocomm-bench's 64 KiB bulk test (compression off).
"""

from __future__ import annotations

import asyncio
import time
import timeit

import distributed
import numpy as np
from distributed.comm.utils import from_frames, to_frames
from distributed.metrics import context_meter
from distributed.protocol.serialize import to_serialize


def per_call_us(fn, number: int = 100_000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


@context_meter.meter("x")
def decorated() -> int:
    return 1


def block() -> None:
    with context_meter.meter("y"):
        pass


def main() -> None:
    print(f"distributed from {distributed.__file__}")
    print(f"decorated, no callback: {per_call_us(decorated):.2f} us")
    with context_meter.add_callback(lambda *a: None):
        print(f"decorated, listened:    {per_call_us(decorated):.2f} us")
    print(f"with-block:             {per_call_us(block):.2f} us")

    arr = np.random.default_rng(1).integers(0, 255, 65536, dtype=np.uint8)
    msg = {"op": "s", "p": to_serialize(arr)}
    ctx = {"sender": {}, "recipient": {}, "compression": None}
    loop = asyncio.new_event_loop()

    async def write(n: int):
        for _ in range(n):
            frames = await to_frames(msg, allow_offload=True, context=ctx,
                                     frame_split_size=2**26)
        return frames

    frames = loop.run_until_complete(write(1))

    async def read(n: int) -> None:
        for _ in range(n):
            await from_frames(frames)

    for name, coro in (("to_frames", write), ("from_frames", read)):
        best = float("inf")
        for _ in range(7):
            t0 = time.perf_counter()
            loop.run_until_complete(coro(1000))
            best = min(best, time.perf_counter() - t0)
        print(f"{name} (64 KiB array):  {best / 1000 * 1e6:.1f} us")
    loop.close()


if __name__ == "__main__":
    main()

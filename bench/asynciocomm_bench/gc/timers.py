"""Do the loop's timers fire before their deadline? A minimal check.

    python -m asynciocomm_bench.gc.timers [--loops asyncio,uvloop] [--n 2000] [--busy-ms 0,1,3]

BatchedSend compares ``time()`` with its deadline when its wait returns, and
waits again if the deadline is still ahead; a timer that fires early therefore
costs a second wait, and before ``patches/0011`` a second TimeoutError cycle.
For each loop and each amount of work done between setting the deadline and
arming the wait (``busy``: BatchedSend's write of the batch), this waits for
``n`` 2 ms deadlines as BatchedSend does: ``loop.call_later(deadline - now)``
(tornado's ``IOLoop.call_at``), again while ``time.time()`` is still before the
deadline; it counts the wake-ups per deadline and how early the early ones were.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

DELAY_S = 0.002


async def _measure(n: int, busy_s: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    wakeups = 0
    early: list[float] = []
    for _ in range(n):
        await asyncio.sleep(0)  # a fresh loop iteration
        deadline = time.time() + DELAY_S  # as BatchedSend sets it, before its write
        spin = time.perf_counter() + busy_s
        while time.perf_counter() < spin:  # the write, in the same iteration
            pass
        while True:  # BatchedSend's loop: wait for the deadline, again if early
            done = loop.create_future()
            loop.call_later(max(0.0, deadline - time.time()), done.set_result, None)
            await done
            wakeups += 1
            now = time.time()
            if now >= deadline:
                break
            early.append(deadline - now)
    early.sort()
    return {"deadlines": n, "wakeups_per_deadline": wakeups / n, "early": len(early),
            "median_early_ms": 1000 * early[len(early) // 2] if early else 0.0,
            "max_early_ms": 1000 * early[-1] if early else 0.0}


def run(loop: str, n: int, busy_ms: float) -> dict[str, Any]:
    """The early timers of ``n`` 2 ms timers on ``loop``."""
    from asynciocomm_bench.common.loops import run_on_loop

    return run_on_loop(lambda: _measure(n, busy_ms / 1000), loop)


def main(argv: list[str] | None = None) -> int:
    """Print one JSON line per loop and amount of work."""
    p = argparse.ArgumentParser(prog="python -m asynciocomm_bench.gc.timers")
    p.add_argument("--loops", default="asyncio,uvloop")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--busy-ms", default="0,1,3")
    args = p.parse_args(argv)
    for busy in [float(b) for b in args.busy_ms.split(",")]:
        for loop in args.loops.split(","):
            print(json.dumps({"loop": loop, "busy_ms": busy, **run(loop, args.n, busy)}),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

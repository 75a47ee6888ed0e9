"""Many ``Worker``s in one process, on one event loop: a host of the scale bench.

Each worker has ``nthreads=1``, its own connection to the scheduler and its
own listener, as on a real cluster; they only share the process and its loop,
so that hundreds of workers fit on two cores. The loop is chosen through
distributed's ``distributed.admin.event-loop`` setting (the environment's
``DASK_DISTRIBUTED__ADMIN__EVENT_LOOP``); no policy is installed.

    python -m asynciocomm_bench.scale.workerproc SCHEDULER_ADDRESS --workers N --host IP
        [--protocol SCHEME] [--name PREFIX] [--local-directory DIR]

It prints ``WORKER <name> <address> <listener class>`` per worker and
``READY <n>`` once every worker has started, and stops its workers on SIGTERM
or SIGINT. ``--takeover`` serves ``tcp://`` and ``tls://`` with asynciocomm.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from asynciocomm_bench.scale.lifeline import die_with_parent

#: Workers started at once: every start is a handshake and a registration at
#: the scheduler, and hundreds at once make its accept queue the bottleneck.
START_BATCH = 8
#: Seconds a worker may take to start, and all of them to close.
START_TIMEOUT_S = 120.0
CLOSE_TIMEOUT_S = 10.0


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m asynciocomm_bench.scale.workerproc")
    p.add_argument("scheduler")
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--host", default=None, help="address to listen on (default: all)")
    p.add_argument("--protocol", default=None)
    p.add_argument("--name", default="w")
    p.add_argument("--local-directory", default=None)
    p.add_argument("--takeover", action="store_true",
                   help="serve tcp:// and tls:// with asynciocomm (asynciocomm.install())")
    return p.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    """Start the workers, report, wait for a signal, close them."""
    from distributed import Worker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    workers: list[Any] = []
    for first in range(0, args.workers, START_BATCH):
        batch = [Worker(args.scheduler, nthreads=1, host=args.host,
                        protocol=args.protocol, name=f"{args.name}{i}",
                        memory_limit=0, dashboard=False,
                        local_directory=args.local_directory)
                 for i in range(first, min(args.workers, first + START_BATCH))]
        workers += batch
        await asyncio.wait_for(asyncio.gather(*(w.start() for w in batch)),
                               START_TIMEOUT_S)
        if stop.is_set():
            break
    for w in workers:
        listener = type(w.listener)
        print(f"WORKER {w.name} {w.address} {listener.__module__}.{listener.__qualname__}")
    print(f"READY {len(workers)}", flush=True)
    await stop.wait()
    await asyncio.wait(
        [asyncio.ensure_future(w.close(timeout=CLOSE_TIMEOUT_S)) for w in workers],
        timeout=CLOSE_TIMEOUT_S)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run :func:`serve` on distributed's configured loop."""
    die_with_parent()
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.takeover:
        import asynciocomm

        asynciocomm.install()
    from distributed.compatibility import asyncio_run
    from distributed.config import get_loop_factory

    asyncio_run(serve(args), loop_factory=get_loop_factory())
    return 0


if __name__ == "__main__":
    sys.exit(main())

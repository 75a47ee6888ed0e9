"""Running coroutines on the loop chosen through distributed's own setting."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import dask

T = TypeVar("T")

EVENT_LOOP_KEY = "distributed.admin.event-loop"


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory of fresh ``name`` loops, made as distributed makes them; it
    carries its loop's name as ``loop_name`` (the bench's tests read it)."""
    from distributed.config import get_loop_factory

    def factory() -> asyncio.AbstractEventLoop:
        with dask.config.set({EVENT_LOOP_KEY: name}):
            make = get_loop_factory()
        return make() if make is not None else asyncio.new_event_loop()

    factory.loop_name = name  # type: ignore[attr-defined]
    return factory


def run_on_loop(main: Callable[[], Awaitable[T]], loop: str) -> T:
    """Run ``main()`` to completion on a fresh ``loop`` ("asyncio"/"uvloop").

    The loop is chosen only through ``distributed.admin.event-loop`` and
    ``distributed.config.get_loop_factory``; no event-loop policy is installed.
    """
    from distributed.compatibility import asyncio_run
    from distributed.config import get_loop_factory

    async def _wrapped() -> T:
        return await main()

    with dask.config.set({EVENT_LOOP_KEY: loop}):
        factory = get_loop_factory()
        return asyncio_run(_wrapped(), loop_factory=factory)


def running_loop_class() -> str:
    """The qualified class name of the running event loop."""
    cls = type(asyncio.get_running_loop())
    return f"{cls.__module__}.{cls.__qualname__}"


def loop_env(loop: str) -> dict[str, str]:
    """Environment variables that make dask subprocesses use ``loop``."""
    return {"DASK_DISTRIBUTED__ADMIN__EVENT_LOOP": loop}

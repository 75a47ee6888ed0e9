"""Event loops chosen as distributed chooses them: through its own
``distributed.admin.event-loop`` setting and ``get_loop_factory``, never through an
installed loop policy. The test fixtures (tests/conftest.py) and the peers'
subprocesses both make their loops here."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import dask
from distributed.compatibility import asyncio_run
from distributed.config import get_loop_factory

T = TypeVar("T")

#: distributed's setting that names the event loop.
EVENT_LOOP_KEY = "distributed.admin.event-loop"


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory of fresh ``name`` loops ("asyncio" or "uvloop"); the factory
    carries its loop's name as ``loop_name``."""

    def factory() -> asyncio.AbstractEventLoop:
        with dask.config.set({EVENT_LOOP_KEY: name}):
            make = get_loop_factory()
        return make() if make is not None else asyncio.new_event_loop()

    factory.loop_name = name  # type: ignore[attr-defined]
    return factory


def run_on_loop(main: Callable[[], Awaitable[T]], loop: str) -> T:
    """Run ``main()`` to completion on a fresh ``loop``, with distributed's
    setting naming it while it runs (what ``main`` starts uses the same loop)."""

    async def _wrapped() -> T:
        return await main()

    with dask.config.set({EVENT_LOOP_KEY: loop}):
        return asyncio_run(_wrapped(), loop_factory=loop_factory(loop))

"""What the transport left open is closed when its event loop shuts down.

A listener that is never stopped, or a comm that is never closed (a test that
fails half-way, a ``close()`` task cancelled before it starts), holds a handle
of the event loop. uvloop's ``Loop.close()`` warns about every handle still
open (``ResourceWarning: unclosed resource``) and then closes it; where
warnings are errors, as in distributed's own test suite, the warning escapes
that step, the handle is never closed, and ``Loop.close()`` waits for it
forever, beyond pytest-timeout's reach (the loop is in C). The stock comm
survives the same test: on uvloop its sockets are polls, which the loop closes
without a warning.

``asyncio.run()``, ``asyncio.Runner`` and so distributed's loop runners
(``gen_test``, the ``loop`` fixture, ``LoopRunner``) and pytest-asyncio call
``loop.shutdown_asyncgens()`` before ``loop.close()``: every async generator
the loop has seen started is closed there, after the loop's tasks were
cancelled. That is the public signal that a loop is shutting down. One
generator per loop, started with its first listener or connection, closes
there what is still open: listeners stop, connections are aborted.

References go one way only (no cycle): each tracked object holds the
generator, which holds the set of tracked objects weakly, and a module-level
map from the loop (weakly) to that set. When nothing open holds the generator
any more it is dropped; on a running loop the loop's finalizer hook then
closes it in a task, with nothing left to close, and the next object starts a
new one.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator
from typing import Protocol


class Closable(Protocol):
    def close_at_loop_shutdown(self) -> None:
        """Close now, without waiting for the loop: it is shutting down."""


class _Open:
    """The objects still open on one loop, and the generator that closes them."""

    __slots__ = ("objects", "guard", "__weakref__")

    def __init__(self) -> None:
        self.objects: weakref.WeakSet[Closable] = weakref.WeakSet()
        self.guard: weakref.ref[AsyncGenerator[None, None]] | None = None


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Open] = (
    weakref.WeakKeyDictionary()
)


async def _close_at_shutdown(open_: _Open) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        # Objects closed before are still here if something else holds them:
        # closing them again does nothing.
        for obj in list(open_.objects):
            obj.close_at_loop_shutdown()
        open_.objects.clear()


def track(obj: Closable) -> AsyncGenerator[None, None]:
    """Close ``obj`` when the running loop shuts down, unless it is gone by
    then. Returns the loop's guard: ``obj`` keeps it referenced while it is
    open and drops it when it closes."""
    loop = asyncio.get_running_loop()
    open_ = _by_loop.get(loop)
    guard = open_.guard() if open_ is not None and open_.guard is not None else None
    if open_ is None or guard is None:
        # A set of its own per guard: a dropped guard's finalizer closes its
        # own generator later, in a task, and must not touch the new set.
        open_ = _by_loop[loop] = _Open()
        guard = _close_at_shutdown(open_)
        # The first step runs the loop's first-iteration hook, which adds the
        # generator to the set that shutdown_asyncgens() closes; it stops at
        # the yield without suspending anything.
        step = guard.asend(None)
        try:
            step.send(None)
        except StopIteration:
            pass
        open_.guard = weakref.ref(guard)
    open_.objects.add(obj)
    return guard

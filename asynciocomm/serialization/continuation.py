"""The rest of a message's (de)serialization, for the comm to await.

A codec gives a message's frames (or, reading, the message) at once when it can.
Where the rest must wait (distributed's own ``to_frames``/``from_frames``, which
may offload; or a message begun on the loop that ``to_frames`` would offload), it
gives one :class:`Continuation` instead, and the comm awaits it. The coroutine is
made only then: a continuation that is dropped (the self-check looks at its type
alone) leaves no coroutine that was never awaited.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any


class Continuation:
    """``await`` it for ``function(*args)``'s result; ``function`` is async."""

    __slots__ = ("_function", "_args")

    def __init__(self, function: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._function = function
        self._args = args

    def __await__(self) -> Generator[Any, None, Any]:
        function, args = self._function, self._args
        self._args = ()  # awaited once; the message is not kept past it
        return function(*args).__await__()

    def __repr__(self) -> str:
        return f"<Continuation {getattr(self._function, '__qualname__', self._function)}>"

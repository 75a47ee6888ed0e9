"""distributed's metered (de)serialization steps, minus the meter nobody reads.

distributed wraps ``serialize_and_split``, ``maybe_compress``, ``decompress`` and
``merge_and_deserialize`` in ``context_meter.meter(label)``. A meter records the
step's time and hands it to the callbacks registered in the current context
(``context_meter.add_callback``: a worker's ``get-data`` and ``gather-dep``, the
``execute`` path, spilling, and an enclosing ``meter`` collecting its offsets).
Measured here, each meter costs about 3 µs even when no callback is registered
(a generator-based context manager, a nested ``meter``, a ContextVar set and
reset, a dict copy), and a message with one ``Serialize`` passes through two of
them on each side: more than serializing a 64 KiB NumPy array (3.7 µs).

:func:`unobserved` returns a function that calls the step itself when the
current context has no callback, so that no one could receive the metric, and
the metered step otherwise. Callers see the same results, and every metric that
has a receiver is emitted exactly as before. If distributed's internals differ
from what this module expects (no ``_callbacks`` ContextVar, no ``__wrapped__``
on a step), the metered step is always used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from distributed.metrics import context_meter

from asynciocomm.serialization import internals

F = TypeVar("F", bound=Callable[..., Any])

_callbacks: Any = internals.METER_CALLBACKS
#: Whether distributed keeps its meter callbacks where this module looks.
SUPPORTED: bool = _callbacks is not None


def listening() -> bool:
    """Whether a metric emitted now would reach a callback."""
    return not SUPPORTED or bool(_callbacks.get())


def unheard() -> contextlib.AbstractContextManager[Any]:
    """A context in which no metric reaches the caller's callbacks: the
    self-checks' (de)serializations are not the work of the message that
    happens to trigger them (a worker's get-data, say), and with a callback
    listening the fast paths would step aside and go unchecked."""
    clear = getattr(context_meter, "clear_callbacks", None)
    return clear() if clear is not None else contextlib.nullcontext()


def unobserved(metered: F) -> F:
    """``metered`` itself while a callback listens, else the function it wraps."""
    bare = internals.unwrapped(metered)
    if not SUPPORTED or bare is None:
        return metered
    get = _callbacks.get

    def call(*args: Any, **kwargs: Any) -> Any:
        if get():
            return metered(*args, **kwargs)
        return bare(*args, **kwargs)

    call.__name__ = getattr(metered, "__name__", "step")
    call.__doc__ = f"{call.__name__}, metered only while a callback listens."
    return call  # type: ignore[return-value]

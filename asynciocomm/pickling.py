"""distributed's ``pickle.dumps``, each pickler run no more often than there.

``distributed.protocol.pickle.dumps`` tries ``pickle.dumps`` first and keeps its
result unless it fails, contains ``__main__``, or the object's module is
registered with cloudpickle for pickling by value; then it pickles again with
``_DaskPickler`` or cloudpickle. :func:`pickle_dumps` runs the same steps in the
same order, with the same results, logs and errors, so an object is pickled
exactly as often as there (an object of a class defined in a script, for
instance: ``pickle.dumps`` then ``cloudpickle.dumps``, twice, not three times).

The one step it leaves out is ``inspect.getmodule(x)`` while no module is
registered for pickling by value: its name is then tested against an empty
list, which cannot match. Without it (and without the keyword dict that
distributed builds), a task spec pickles in 4.2 µs instead of distributed's
5.4 µs (best of 9, CPU time); the results differ only for an object whose ``__module__``
attribute raises or is unhashable, which distributed then sends to cloudpickle.
"""

from __future__ import annotations

import inspect
import io
import logging
import pickle
from typing import Any

import cloudpickle
from distributed.protocol.pickle import HIGHEST_PROTOCOL
from distributed.protocol.pickle import dumps as _distributed_dumps

try:
    from distributed.protocol.pickle import _always_use_pickle_for, _DaskPickler
except ImportError:  # another distributed: its own function is used as it is
    _DaskPickler = None

#: distributed's logger for a failed pickle, so that its record reads the same.
_logger = logging.getLogger("distributed.protocol.pickle")
_registry = cloudpickle.list_registry_pickle_by_value


def pickle_dumps(x: Any) -> tuple[bytes, list[Any]]:
    """``distributed.protocol.pickle.dumps(x, buffer_callback=buffers.append)``:
    its result, and the out-of-band ``buffers`` it passes to the callback."""
    buffers: list[Any] = []
    if _DaskPickler is None:
        return _distributed_dumps(x, buffer_callback=buffers.append), buffers
    try:
        result = pickle.dumps(x, protocol=HIGHEST_PROTOCOL, buffer_callback=buffers.append)
    except Exception:
        result = None
    else:
        if b"__main__" not in result and not _registry():
            return result, buffers
    # distributed's function from here on, continued with pickle's attempt.
    kwargs: dict[str, Any] = {"protocol": HIGHEST_PROTOCOL, "buffer_callback": buffers.append}
    try:
        if result is None:
            f = io.BytesIO()
            pickler = _DaskPickler(f, **kwargs)
            buffers.clear()
            pickler.dump(x)
            result = f.getvalue()
        if b"__main__" in result or (
            getattr(inspect.getmodule(x), "__name__", None) in _registry()
        ):
            if len(result) < 1000 or not _always_use_pickle_for(x):
                buffers.clear()
                result = cloudpickle.dumps(x, **kwargs)
    except Exception:
        try:
            buffers.clear()
            result = cloudpickle.dumps(x, **kwargs)
        except Exception:
            _logger.exception("Failed to serialize %s.", x)
            raise
    return result, buffers

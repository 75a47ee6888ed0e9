"""distributed's ``pickle.dumps``, each pickler run no more often than there.

``distributed.protocol.pickle.dumps`` tries ``pickle.dumps`` first and keeps its
result unless it fails, contains ``__main__``, or the object's module is
registered with cloudpickle for pickling by value; then it pickles again with
``_DaskPickler`` or cloudpickle. :func:`pickle_dumps` runs the same steps in the
same order, with the same results, logs and errors, so an object is pickled
exactly as often as there (an object of a class defined in a script, for
instance: ``pickle.dumps`` then ``cloudpickle.dumps``, twice, not three times).

Two steps are left out where their outcome is certain:

* ``inspect.getmodule(x)`` while no module is registered for pickling by value:
  its name is then tested against an empty list, which cannot match. Without it
  (and without the keyword dict that distributed builds), a task spec pickles in
  4.2 µs instead of distributed's 5.4 µs (best of 9, CPU time); the results
  differ only for an object whose ``__module__`` attribute raises or is
  unhashable, which distributed then sends to cloudpickle.
* the attempts that must fail or be discarded, for a task whose function is
  pickled by value (:func:`by_value`): a user's local function or lambda, or a
  function of ``__main__``. distributed runs ``pickle.dumps`` and
  ``_DaskPickler`` on such a task for nothing and keeps ``cloudpickle.dumps``;
  here only cloudpickle runs (the task spec of a ``compute-task`` of
  ``client.map`` with a local function: 16 µs of CPU instead of 27-28 µs, best
  of 9; bench/results/writepath.md). The test costs 0.4 µs and keeps no cache.
  Should cloudpickle fail, distributed's steps run from the start, for its logs
  and its error: cloudpickle then runs twice on a message that fails anyway.
  What the skipped attempts would have done only on the side (``__reduce__`` of
  the task's arguments, dask's lazy serializer registrations) is not done.
"""

from __future__ import annotations

import _pickle
import builtins
import copyreg
import inspect
import io
import logging
import pickle
import sys
from types import FunctionType
from typing import Any

import cloudpickle
from dask.utils import Dispatch
from distributed.protocol.pickle import HIGHEST_PROTOCOL
from distributed.protocol.pickle import dumps as _distributed_dumps
from distributed.protocol.serialize import dask_serialize

from asynciocomm.serialization import internals


class _NoTask:
    """Stands for dask's Task where there is none: no object is of this type."""


# Private names (asynciocomm.serialization.internals): where one is missing, by_value() is
# always False, and without the pickler steps distributed's dumps is called.
Task: Any = internals.TASK if internals.TASK is not None else _NoTask
_DaskPickler: Any = internals.DASK_PICKLER
_always_use_pickle_for: Any = internals.ALWAYS_USE_PICKLE_FOR
_STEPS = _DaskPickler is not None and _always_use_pickle_for is not None
_serialize_lookup: Any = internals.SERIALIZE_LOOKUP
_serialize_lazy: Any = internals.SERIALIZE_LAZY
_extension_registry: Any = internals.EXTENSION_REGISTRY

#: distributed's logger for a failed pickle, so that its record reads the same.
_logger = logging.getLogger("distributed.protocol.pickle")
_registry = cloudpickle.list_registry_pickle_by_value
#: Classes whose dask serializer would make ``_DaskPickler`` reduce a task or its
#: function (their MROs), and the top-level modules of their lazy registrations.
_TASK_AND_FUNCTION_MROS = frozenset(Task.__mro__ + FunctionType.__mro__)
_TOPLEVELS = frozenset(c.__module__.partition(".")[0] for c in _TASK_AND_FUNCTION_MROS)
#: A task's pickling as dask defines it (object's reduction, with its slots,
#: ``func`` among them, as state) and _DaskPickler's hook, as imported.
#: ``__getstate__`` by getattr: object has none before CPython 3.11, nor has
#: dask's Task before dask 2025.3.0, so there it is None.
_MACHINERY = (Task.__reduce_ex__, Task.__reduce__, getattr(Task, "__getstate__", None),
              getattr(_DaskPickler, "reducer_override", None))
_IMPORT = builtins.__import__
_SKIPPABLE = (
    _STEPS
    and internals.TASK is not None
    and pickle.Pickler is _pickle.Pickler and pickle.dumps is _pickle.dumps  # the C pickler's rules
    and _MACHINERY[:2] == (object.__reduce_ex__, object.__reduce__)
    and "func" in internals.TASK_SLOTS
    and type(dask_serialize) is Dispatch  # whose dispatch() reads _lookup and _lazy
    and _serialize_lookup is not None and _serialize_lazy is not None
    and _extension_registry is not None
)


def by_value(x: Any) -> bool:
    """Whether distributed's ``dumps(x)`` certainly ends in ``cloudpickle.dumps(x)``,
    every attempt before it failing or containing ``__main__``.

    ``x`` is a :class:`dask.Task` of a plain function, both pickled as dask and
    distributed define it: the task by its slots (``copyreg`` has no reducer for
    it, its reduction is dask's), neither reduced by ``_DaskPickler`` (its hook is
    distributed's, with no dask serializer, lazy or not, for a class of their MROs).
    Pickling the task then
    pickles its function by reference, after its arguments, and that fails or
    writes ``__main__`` whatever the arguments do: the function's qualified name
    has a ``<locals>`` part (which pickle refuses at once), or its module is
    ``__main__`` (which pickle either writes or fails to find it in; no copyreg
    extension code stands for it), or its module, imported, does not hold it
    under that name (a lambda's ``<lambda>``, say). Every test is of the state as
    it is now, so an object or registry changed since is judged afresh.
    """
    if type(x) is not Task or not _SKIPPABLE:
        return False
    func = x.func
    if type(func) is not FunctionType or Task in copyreg.dispatch_table:
        return False
    if (Task.__reduce_ex__, Task.__reduce__, getattr(Task, "__getstate__", None),
            _DaskPickler.reducer_override) != _MACHINERY:
        return False
    if not (_serialize_lookup.keys().isdisjoint(_TASK_AND_FUNCTION_MROS)
            and _serialize_lazy.keys().isdisjoint(_TOPLEVELS)):
        return False
    qualname = func.__qualname__
    path = str.split(qualname, ".")
    if "<locals>" in path:
        return True
    module_name = func.__module__
    if type(module_name) is not str:
        return False  # None: pickle searches sys.modules for it
    if module_name == "__main__":
        return (module_name, qualname) not in _extension_registry
    obj = sys.modules.get(module_name)
    if obj is None or builtins.__import__ is not _IMPORT:
        return False  # pickle would import it (or call a replaced __import__)
    for name in path:
        try:
            obj = getattr(obj, name)
        except Exception:
            return True
    return obj is not func


def pickle_dumps(x: Any) -> tuple[bytes, list[Any]]:
    """``distributed.protocol.pickle.dumps(x, buffer_callback=buffers.append)``:
    its result, and the out-of-band ``buffers`` it passes to the callback."""
    buffers: list[Any] = []
    if not _STEPS:
        return _distributed_dumps(x, buffer_callback=buffers.append), buffers
    if by_value(x):
        try:
            return cloudpickle.dumps(x, protocol=HIGHEST_PROTOCOL,
                                     buffer_callback=buffers.append), buffers
        except Exception:
            buffers.clear()  # distributed's steps from the start, for its logs and error
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

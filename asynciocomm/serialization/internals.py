"""The private names of dask and distributed that the fast paths read, looked up
in one place, each with a fallback.

The fast paths give distributed's bytes and objects with fewer steps
(:mod:`asynciocomm.serialization.fast` and the modules it uses), and some of them
read internals of dask and distributed to know when a shortcut is sure to give
distributed's result. None of these names is an API: any release may drop or
change one. Each is looked up here. One that is missing, or not of the shape
the fast path reads, is None here, and the fast path named beside it is off,
with distributed's own step in its place; :data:`MISSING` lists them, and
:mod:`asynciocomm.serialization.choice` logs them once. Nothing here raises at import.

Every name below is present, in the shape read, on each release tested
(README, "Compatibility").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

#: The fast paths, as :data:`MISSING` and the log name them.
CODEC = "the fast codec (asynciocomm.serialization.fast; without it, to_frames/from_frames)"
BY_VALUE = ("a task of a local function pickled by cloudpickle alone "
            "(asynciocomm.serialization.pickling.by_value)")
PICKLE_STEPS = ("distributed's pickle.dumps step for step "
                "(asynciocomm.serialization.pickling.pickle_dumps)")
ARRAY_WRITE = "NumPy arrays serialized without the generic steps (asynciocomm.serialization.arrays)"
ARRAY_READ = ("NumPy arrays deserialized without the generic steps "
              "(asynciocomm.serialization.arrays)")
METERS = "meters skipped while no callback listens (asynciocomm.serialization.metering)"
SIZING = "offload sizing without dask.sizeof's dispatch per node (asynciocomm.serialization.sizing)"
#: Not a fast path: the transport always frames as the stock comm does.
FRAMING_CHECK = ("the check of the wire framing against the stock writer "
                 "(asynciocomm.framing)")

#: Each private name not found, or not of the shape read: the fast paths it turns off.
MISSING: dict[str, list[str]] = {}

_ABSENT: Any = object()


def _find(where: str, fast_path: str, shape: Callable[[Any], bool]) -> Any:
    """``module:attr.attr`` if it is there and ``shape(value)`` holds, else None
    (and the name recorded in :data:`MISSING`)."""
    module, _, attrs = where.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for name in attrs.split("."):
            obj = getattr(obj, name, _ABSENT)
            if obj is _ABSENT:
                break
        fits = obj is not _ABSENT and shape(obj)
    except Exception:
        fits = False
    if not fits:
        MISSING.setdefault(f"{module}.{attrs}", []).append(fast_path)
        return None
    return obj


def _is_dict(obj: Any) -> bool:
    return type(obj) is dict


def _is_class(obj: Any) -> bool:
    return isinstance(obj, type)


def _meter_callbacks(obj: Any) -> bool:
    return isinstance(obj, ContextVar) and isinstance(obj.get(), dict)


def _number_or_off(obj: Any) -> bool:
    # distributed's comm.offload, parsed: a byte count, or False/None when off.
    return obj is None or isinstance(obj, (int, float))


def unwrapped(function: Any) -> Any:
    """The function a decorator wrapped (``functools.wraps``' ``__wrapped__``),
    or None when there is none: the fast path that calls it is then off."""
    bare = getattr(function, "__wrapped__", None)
    return bare if callable(bare) else None


def slots(cls: type) -> tuple[str, ...]:
    """Every slot name of ``cls`` and its bases, sorted: what dask's
    ``Task.get_all_slots()`` returns where it has one (from dask 2025.3.0)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        declared = klass.__dict__.get("__slots__", ())
        names.update((declared,) if isinstance(declared, str) else declared)
    return tuple(sorted(names))


# --- asynciocomm.serialization.pickling ----------------------------------------------------
#: dask's task spec class: a task is pickled by its slots, ``func`` among them.
TASK: type | None = _find("dask._task_spec:Task", BY_VALUE, _is_class)
TASK_SLOTS: tuple[str, ...] = slots(TASK) if TASK is not None else ()
DASK_PICKLER: type | None = _find(
    "distributed.protocol.pickle:_DaskPickler", PICKLE_STEPS, _is_class)
ALWAYS_USE_PICKLE_FOR: Callable[[Any], bool] | None = _find(
    "distributed.protocol.pickle:_always_use_pickle_for", PICKLE_STEPS, callable)
#: The dispatch tables of distributed's ``"dask"`` serializer family (live dicts:
#: a registration made later is seen).
SERIALIZE_LOOKUP: dict[Any, Any] | None = _find(
    "distributed.protocol.serialize:dask_serialize._lookup", BY_VALUE, _is_dict)
if SERIALIZE_LOOKUP is None:
    MISSING["distributed.protocol.serialize.dask_serialize._lookup"].append(ARRAY_WRITE)
SERIALIZE_LAZY: dict[str, Any] | None = _find(
    "distributed.protocol.serialize:dask_serialize._lazy", BY_VALUE, _is_dict)
DESERIALIZE_LOOKUP: dict[Any, Any] | None = _find(
    "distributed.protocol.serialize:dask_deserialize._lookup", ARRAY_READ, _is_dict)
#: pickle's extension codes (``copyreg.add_extension``).
EXTENSION_REGISTRY: dict[Any, int] | None = _find(
    "copyreg:_extension_registry", BY_VALUE, _is_dict)

# --- asynciocomm.serialization.metering ----------------------------------------------------
METER_CALLBACKS: ContextVar[Any] | None = _find(
    "distributed.metrics:context_meter._callbacks", METERS, _meter_callbacks)

# --- asynciocomm.serialization.fast and packing -------------------------------------
#: to_frames' offload threshold is read live, at each message, as distributed
#: reads it; whether it is there at all is decided here.
_find("distributed.comm.utils:OFFLOAD_THRESHOLD", CODEC, _number_or_off)
IS_MSGPACK_SERIALIZABLE: Callable[[Any], bool] | None = _find(
    "distributed.protocol.serialize:_is_msgpack_serializable", CODEC, callable)
MSGPACK_OPTS: dict[str, Any] | None = _find(
    "distributed.protocol.utils:msgpack_opts", CODEC, _is_dict)
#: ``msgpack.loads``' options for distributed's frames, as its ``loads`` passes
#: them (tuples for lists); msgpack's defaults for the rest where MSGPACK_OPTS
#: is missing (the self-check then finds what differs).
UNPACK_OPTS: dict[str, Any] = dict(use_list=False, **(MSGPACK_OPTS or {}))

# --- asynciocomm.serialization.sizing --------------------------------------------------------
SIZEOF_LOOKUP: dict[type, Any] | None = _find("dask.sizeof:sizeof._lookup", SIZING, _is_dict)
SIZEOF_DICT: Callable[..., Any] | None = _find(
    "dask.sizeof:sizeof_python_dict", SIZING, callable)
SIZEOF_COLLECTION: Callable[..., Any] | None = _find(
    "dask.sizeof:sizeof_python_collection", SIZING, callable)


# --- asynciocomm.framing ---------------------------------------------------------------------
FRAMES_HEADER: Callable[[list[Any]], Any] | None = _find(
    "distributed.comm.tcp:_add_frames_header", FRAMING_CHECK, callable)


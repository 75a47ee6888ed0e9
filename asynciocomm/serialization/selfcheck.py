"""The fast path's frames against distributed's own, on the release installed.

The fast codec (:mod:`asynciocomm.serialization.fast` and the modules it uses) gives
the frames of ``distributed.protocol.dumps`` and reads them as ``loads`` does by
mirroring what distributed's functions do, step for step. A release of
distributed that nobody has tested with it may do something else. So, once per
process, :func:`differences` encodes a fixed set of canonical messages,
one of each kind the fast path handles (plain msgpack, sets and enums, a task
spec pickled by reference and one pickled by value, out-of-band pickle buffers,
the second pass for an object msgpack cannot take, ``Serialize`` and
``Serialized`` data), with the fast codec and with distributed's ``dumps``; it
reads distributed's frames with the
fast codec and with distributed's ``loads``; and it sizes each message as
``to_frames`` does. The first difference is returned; :mod:`asynciocomm.serialization.choice`
then gives every comm distributed's own path. (The wire framing is checked
against the stock writer's by :mod:`asynciocomm.framing`, where the takeover
needs it.)
The NumPy fast paths check themselves when they are armed, at the first array
(:func:`asynciocomm.serialization.arrays._difference`), so that a process that
never sends arrays never imports distributed's ``protocol.numpy`` for it;
:func:`canonical_messages` with ``numpy`` adds an array message for the tests.

Everything is looked up at the time of the check (``distributed.protocol.dumps``
and ``loads`` as the package holds them, which is what ``to_frames`` and
``from_frames`` call).
"""

from __future__ import annotations

import contextlib
import logging
import operator
import pickle
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FunctionType, ModuleType
from typing import Any

import dask
import distributed.protocol
from dask.utils import parse_bytes
from distributed.core import Status
from distributed.protocol.serialize import Serialize, Serialized, ToPickle, serialize
from distributed.sizeof import safe_sizeof

from asynciocomm.log import get_logger
from asynciocomm.serialization import internals
from asynciocomm.serialization.continuation import Continuation
from asynciocomm.serialization.metering import unheard

logger = get_logger(__name__)


@dataclass(frozen=True)
class Opaque:
    """An object msgpack cannot take and pickle can: distributed's second pass."""

    value: int


def _by_value() -> Any:
    def by_value(x: int) -> int:  # a local function: cloudpickle pickles it by value
        return x + 1

    return by_value


class _Comm:
    """What the codec and ``to_frames`` read from a comm after its handshake,
    with compression (zlib, which every Python has) for the frames that qualify."""

    def __init__(self) -> None:
        options = {"compression": "zlib", "pickle-protocol": pickle.HIGHEST_PROTOCOL}
        self.local_info = {"address": "tcp://127.0.0.1:1", **options}
        self.remote_info = {"address": "tcp://127.0.0.1:2", **options}
        self.handshake_options = options
        self.max_shard_size = parse_bytes(dask.config.get("distributed.comm.shard"))
        self.allow_offload = False

    def context(self) -> dict[str, Any]:
        return {"sender": self.local_info, "recipient": self.remote_info,
                **self.handshake_options}


def _task(key: str, func: Any, *args: Any) -> Any:
    """A dask task spec, or a plain tuple where dask has none."""
    task_class = internals.TASK
    return task_class(key, func, *args) if task_class is not None else (func, *args)


Messages = list[tuple[str, Callable[[], Any]]]


def canonical_messages(numpy: ModuleType | None = None) -> Messages:
    """The messages checked, each by name and a function that makes it afresh
    (packing may change a message's sub-objects)."""
    messages: Messages = [
        ("ping", lambda: {"op": "ping", "reply": True}),
        ("stream", lambda: [{
            "op": "task-finished", "key": ("x-1", 3), "nbytes": 8, "type": b"\x80",
            "startstops": ({"action": "compute", "start": 1.5, "stop": 2.25},),
            "name": "__main__"}]),
        ("set-enum", lambda: {"op": "status", "keys": {1, 2, 3}, "status": Status.running}),
        ("compute-task", lambda: {"op": "compute-task", "key": "k",
                                  "run_spec": ToPickle(_task("k", operator.add, 1, 2))}),
        ("task-by-value", lambda: {"op": "compute-task", "key": "v",
                                   "run_spec": ToPickle(_task("v", _by_value(), 1))}),
        # pickle fails, then distributed's pickler, then cloudpickle takes it.
        ("function-by-value", lambda: {"op": "run", "function": ToPickle(_by_value())}),
        # Out-of-band buffers, one compressed (from 10 kB on) and one not.
        ("out-of-band", lambda: {"op": "x", "data": ToPickle(bytearray(b"\x01" * 64)),
                                 "zeros": ToPickle(bytearray(12_000))}),
        # Something pickled, then an object msgpack cannot take: the fast path's
        # second pass (before anything is pickled, distributed's path takes it all).
        ("second-pass", lambda: {"op": "x", "first": ToPickle((1, 2)), "obj": Opaque(7)}),
        ("serialize", lambda: {"op": "data", "data": Serialize(b"payload" * 8),
                               "fwd": Serialized(*serialize([1, "two"]))}),
    ]
    if numpy is not None:
        messages.append(("array", lambda: {"status": "OK", "data": {
            "a": Serialize(numpy.arange(16, dtype="f8")),
            "b": Serialize(numpy.zeros((2, 3), dtype="u1").T)}}))
    return messages


def distributed_frames() -> Iterator[tuple[str, list[Any]]]:
    """Each canonical message's name and distributed's own frames of it, made with
    the context and shard size of the check's comm."""
    comm = _Comm()
    for name, make in canonical_messages():
        yield name, list(distributed.protocol.dumps(
            make(), context=comm.context(), frame_split_size=comm.max_shard_size))


def _same(a: Any, b: Any) -> bool:
    """Whether two decoded objects are alike, as far as the check needs."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, FunctionType):
        return a.__qualname__ == b.__qualname__ and a.__code__.co_code == b.__code__.co_code
    if internals.TASK is not None and isinstance(a, internals.TASK):
        return all(_same(getattr(a, n, None), getattr(b, n, None))
                   for n in ("key", "func", "args", "kwargs"))
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(a, numpy.ndarray):
        return bool(a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes())
    return bool(a == b)


def _as_bytes(frames: Any) -> list[bytes]:
    return [bytes(f) for f in ([frames] if isinstance(frames, bytes) else frames)]


def _message_difference(codec_class: type, name: str, make: Callable[[], Any],
                        comm: _Comm) -> str | None:
    """How the fast codec differs from distributed on one message (None: it does not)."""
    stock = distributed.protocol.dumps(make(), context=comm.context(),
                                       frame_split_size=comm.max_shard_size)
    stock_bytes = _as_bytes(stock)
    fast = codec_class().dumps(make(), comm)
    if not isinstance(fast, Continuation):
        fast_bytes = _as_bytes(fast)
        if len(fast_bytes) != len(stock_bytes):
            return (f"{name}: {len(fast_bytes)} frames, distributed's dumps "
                    f"{len(stock_bytes)}")
        for i, (ours_frame, theirs_frame) in enumerate(zip(fast_bytes, stock_bytes)):
            if ours_frame != theirs_frame:
                return f"{name}: frame {i} differs from distributed's dumps"
    views = [memoryview(bytearray(f)) for f in stock_bytes]
    expected = distributed.protocol.loads(views, deserialize=True)
    got = codec_class.loads(views, sum(v.nbytes for v in views), True, None)
    if not isinstance(got, Continuation) and not _same(got, expected):
        return f"{name}: distributed's frames read differently from its loads"
    from asynciocomm.serialization.sizing import message_size

    msg = make()
    if message_size(msg) != safe_sizeof(msg, default_size=-1):
        return f"{name}: sized differently from to_frames' safe_sizeof"
    return None


class _Quiet(logging.Filter):
    """Drops the records of one thread: the INFO that distributed's ``dumps`` (and
    the fast path, as it) logs for the second pass is not news during the check."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    log = logging.getLogger(name)
    quiet = _Quiet()
    log.addFilter(quiet)
    try:
        yield
    finally:
        log.removeFilter(quiet)


def _differences(codec_class: type, messages: Messages) -> str | None:
    """The first difference of the fast codec."""
    comm = _Comm()
    with unheard(), _quiet("distributed.protocol.core"):
        for name, make in messages:
            try:
                found = _message_difference(codec_class, name, make, comm)
            except Exception as e:
                found = f"{name}: {type(e).__name__}: {e}"
            if found is not None:
                return found
    return None


def differences(codec_class: type) -> str | None:
    """How ``codec_class`` (the fast codec) differs from distributed's ``dumps``
    and ``loads`` on the canonical messages (None where they agree)."""
    # No array here: arming the NumPy fast paths imports distributed's
    # protocol.numpy (numpy.ma with it, 50 ms); they are checked when armed.
    return _differences(codec_class, canonical_messages())


def release() -> str:
    """The releases installed, as the warning names them."""
    return f"distributed {distributed.__version__} with dask {dask.__version__}"


def report(what: str) -> None:
    """Log, once for each thing found, that a fast path is off and why."""
    logger.warning(
        "asynciocomm on %s: %s. distributed's own steps are used in its place, so "
        "the bytes stay distributed's; see asynciocomm's README, Compatibility.",
        release(), what)

"""Conformance checks that a comm makes no reference cycles.

With the collector off, every message shape (in-band, sub-frames, pickled
values, messages above distributed's offload threshold with each kind of value
before their first ``to_serialize``) is written, echoed and read; then
``gc.collect()`` must find nothing. So must a write that fails while it
serializes. A cycle keeps a message and its frames alive until the collector
runs, and when the garbage holds a memoryview exported by another object of
the same cycle, CPython's collector cannot clear it (``BufferError`` in
``tp_clear``) and the process may crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from distributed.comm.utils import OFFLOAD_THRESHOLD
from distributed.protocol import Serialized, serialize, to_serialize
from distributed.protocol.serialize import Pickled, ToPickle

from tests.certs import Certs
from tests.variants import Variant, connect_to, serve

#: Upper bound for any single wait in these checks (a hang fails, never blocks CI).
WAIT = 30


class Unpicklable:
    """A value whose pickling fails: the write raises while it serializes."""

    def __reduce__(self) -> Any:
        raise RuntimeError("this object refuses to be pickled")


def message_shapes() -> Iterator[tuple[str, Any]]:
    """(name, message): every kind of value, small and above the offload
    threshold, alone and before a ``to_serialize`` that triggers the offload."""
    big = np.arange(OFFLOAD_THRESHOLD + (1 << 20), dtype="u1")
    floats = np.arange(1000.0)  # a non-uint8 array: its pickle exports a memoryview
    firsts = {
        "to-pickle": ToPickle(floats),
        "pickled": Pickled({"pickled-obj": pickle.dumps(1)}, []),
        "serialized": Serialized(*serialize(b"abc")),
        "set": {1, 2},
        "unknown-type": complex(1, 2),  # msgpack's TypeError: distributed's second pass
        "bytes": b"x" * 100,
    }
    yield "ping", {"op": "ping"}
    yield "small-array", {"x": to_serialize(floats)}
    yield "large-bytes", {"b": bytes(OFFLOAD_THRESHOLD + 1)}
    yield "large-array", {"x": to_serialize(big)}
    for name, value in firsts.items():
        yield f"{name}", {"v": value}
        yield f"{name}-then-large-array", {"v": value, "x": to_serialize(big)}


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The collector off, and every object that already exists kept alive.

    A ``gc.collect()`` inside then counts only cycles made of objects created
    inside the block, i.e. by the messages. Without the pin, a cycle an earlier
    test left pending (a Tornado ``gen.coroutine`` runner waiting on an
    ``Event``, say) that becomes unreachable inside the block would be counted
    against the comm under test.
    """
    gc.collect()
    pinned = gc.get_objects()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        del pinned


async def _echo_forever(comm: Any) -> None:
    with contextlib.suppress(Exception):
        while True:
            await comm.write(await comm.read())


@pytest.mark.filterwarnings("ignore::UserWarning")
async def check_no_reference_cycles_per_message_shape(variant: Variant, certs: Certs) -> None:
    shapes = list(message_shapes())
    async with serve(variant, certs, _echo_forever) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        try:
            for _, msg in shapes:  # first-use caches are not per-message garbage
                await comm.write(msg)
                await asyncio.wait_for(comm.read(), WAIT)
            found = {}
            with collector_off():
                for name, msg in shapes:
                    for _ in range(2):
                        await comm.write(msg)
                        await asyncio.wait_for(comm.read(), WAIT)
                    found[name] = gc.collect()
            assert not any(found.values()), {k: v for k, v in found.items() if v}
        finally:
            await comm.close()


async def check_no_reference_cycles_when_a_write_fails(variant: Variant, certs: Certs) -> None:
    big = np.arange(OFFLOAD_THRESHOLD + (1 << 20), dtype="u1")
    failing = {
        "unpicklable": {"t": ToPickle(Unpicklable())},
        "unpicklable-in-second-pass": {"u": complex(1, 2), "o": Unpicklable()},
        "unpicklable-then-large-array": {"t": ToPickle(Unpicklable()), "x": to_serialize(big)},
    }
    async with serve(variant, certs, _echo_forever) as listener:
        comm = await connect_to(variant, certs, listener.contact_address)
        try:
            for msg in failing.values():  # warm-up, as above
                with contextlib.suppress(Exception):
                    await comm.write(msg)
            found = {}
            with collector_off():
                for name, msg in failing.items():
                    for _ in range(2):
                        with contextlib.suppress(Exception):
                            await comm.write(msg)
                    found[name] = gc.collect()
            assert not any(found.values()), {k: v for k, v in found.items() if v}
            # The comm survived the failed writes, as stock's does.
            await comm.write({"op": "after"})
            assert await asyncio.wait_for(comm.read(), WAIT) == {"op": "after"}
        finally:
            await comm.close()

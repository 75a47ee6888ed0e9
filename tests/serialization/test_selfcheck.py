"""Releases of dask and distributed: the private names the fast paths read, and
the self-check of their bytes against distributed's own.

On a tested release every name is there and every fast path is on (README,
"Compatibility"). A name that is missing or changed turns off the fast path
that reads it, with distributed's own step in its place: each case runs in a
process of its own where the names are hidden from asynciocomm (see
tests/helpers_hidden.py), and must import, report which fast paths are off in
one WARNING, pass the self-check and carry every canonical message intact over
a real connection. The self-check is shown to catch release-like changes: a
``dumps`` that writes other bytes, a ``loads`` that reads other objects, a
pickle of another protocol, another framing.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import subprocess
import sys
from typing import Any

import distributed
import distributed.protocol
import msgpack
import numpy as np
import pytest
from distributed.comm import listen

from asynciocomm import framing
from asynciocomm.backend import takeover_backend
from asynciocomm.serialization import (
    arrays,
    internals,
    metering,
    pickling,
    recovery,
    selfcheck,
    sizing,
)
from asynciocomm.serialization import choice as codecs
from asynciocomm.serialization import fast as serialization
from asynciocomm.serialization.fast import MessageCodec
from asynciocomm.serialization.stock import StockCodec
from tests.helpers_net import WAIT, RawPeer, handshake_msg, parse_frames

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: The fast paths a case reports, by the name helpers_hidden gives them.
ALL_ON = {"by_value": True, "pickle_steps": True, "meters": True, "sizing": True,
          "array_write": True, "array_read": True}


def _fast_paths_here() -> dict[str, bool]:
    arrays._arm()
    return {
        "by_value": bool(pickling._SKIPPABLE),
        "pickle_steps": bool(pickling._STEPS),
        "meters": metering.SUPPORTED,
        "sizing": sizing._LOOKUP is not None,
        "array_write": arrays._Fast.serialize is not None,
        "array_read": arrays._Fast.deserialize is not None,
    }


def test_every_private_name_is_found_and_every_fast_path_is_on() -> None:
    assert internals.MISSING == {}
    assert codecs.decided() == (MessageCodec, None)
    assert type(codecs.new_codec()) is MessageCodec
    assert _fast_paths_here() == ALL_ON


def test_the_self_check_passes_on_this_release() -> None:
    assert selfcheck.differences(MessageCodec) is None
    assert arrays._difference(np) is None


def test_the_self_check_goes_through_each_fast_path(monkeypatch) -> None:
    """Each fast path is taken by some canonical message, so a change there shows
    (the NumPy ones by the message checked when they arm)."""
    taken: dict[str, int] = {}

    def spy(module: Any, name: str, taken_if: Any = lambda result: True) -> None:
        real = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            if taken_if(result):
                taken[name] = taken.get(name, 0) + 1
            return result

        monkeypatch.setattr(module, name, wrapper)

    spy(pickling, "by_value", bool)  # a task pickled by cloudpickle alone
    pickler = pickling._DaskPickler

    class Pickler(pickler):  # type: ignore[misc,valid-type]
        def dump(self, obj: Any) -> None:
            taken["_DaskPickler"] = taken.get("_DaskPickler", 0) + 1
            super().dump(obj)

    monkeypatch.setattr(pickling, "_DaskPickler", Pickler)  # pickle_dumps' own steps
    spy(arrays, "_applies", bool)  # an array serialized by the fast path
    spy(arrays, "_checked", lambda entry: entry is not None)  # ... and read by it
    spy(serialization, "_unpackb")  # a message read without distributed's hook
    spy(serialization, "loads")  # ... and one with it
    spy(recovery, "second_pass")  # an object msgpack cannot take
    spy(sizing, "_size")  # the offload sizing's own walk
    monkeypatch.setattr(arrays, "_read_cache", {})
    assert selfcheck.differences(MessageCodec) is None
    assert set(taken) == {"by_value", "_DaskPickler", "_unpackb", "loads", "second_pass",
                          "_size"}
    taken.clear()
    assert arrays._difference(np) is None
    assert {"_applies", "_checked"} <= set(taken)


# --- release-like changes that the self-check must catch --------------------------


def _reversed_head(dumps: Any) -> Any:
    """A ``dumps`` that writes its messages' keys in the opposite order: other
    bytes, the same messages once read (as a release might change them)."""

    def changed(*args: Any, **kwargs: Any) -> list[Any]:
        frames = dumps(*args, **kwargs)
        head = msgpack.unpackb(frames[0], raw=False, strict_map_key=False, use_list=False)
        if isinstance(head, dict):
            frames[0] = msgpack.packb(dict(reversed(head.items())), use_bin_type=True)
        return frames

    return changed


def test_a_dumps_that_writes_other_bytes_is_caught(monkeypatch, caplog) -> None:
    monkeypatch.setattr(distributed.protocol, "dumps",
                        _reversed_head(distributed.protocol.dumps))
    codec, why = codecs.decide()
    assert codec is StockCodec and why == "ping: frame 0 differs from distributed's dumps"
    caplog.clear()
    with caplog.at_level(logging.WARNING, "distributed.comm.asyncio"):
        codecs.report(why)
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.name == "distributed.comm.asyncio.selfcheck"
    assert f"distributed {distributed.__version__}" in record.getMessage()
    assert "ping: frame 0 differs" in record.getMessage()


def test_a_loads_that_reads_other_objects_is_caught(monkeypatch) -> None:
    loads = distributed.protocol.loads

    def changed(*args: Any, **kwargs: Any) -> Any:
        msg = loads(*args, **kwargs)
        return {**msg, "new": True} if isinstance(msg, dict) else msg

    monkeypatch.setattr(distributed.protocol, "loads", changed)
    assert selfcheck.differences(MessageCodec) == (
        "ping: distributed's frames read differently from its loads")


def test_a_pickle_of_another_protocol_is_caught(monkeypatch) -> None:
    from distributed.protocol import pickle as distributed_pickle

    dumps = distributed_pickle.dumps

    def changed(x: Any, *, buffer_callback: Any = None, protocol: int = 5) -> bytes:
        return dumps(x, buffer_callback=buffer_callback, protocol=4)

    monkeypatch.setattr(distributed_pickle, "dumps", changed)
    assert selfcheck.differences(MessageCodec) == (
        "compute-task: frame 1 differs from distributed's dumps")


def test_an_array_header_of_other_bytes_is_caught_when_the_array_paths_arm(
        monkeypatch, caplog) -> None:
    core = importlib.import_module("distributed.protocol.core")
    split = core.serialize_and_split

    def changed(*args: Any, **kwargs: Any) -> Any:
        header, frames = split(*args, **kwargs)
        return {**header, "new": True}, frames

    monkeypatch.setattr(core, "serialize_and_split", changed)
    for name in ("armed", "ndarray", "serialize", "deserialize", "deserialize_bare"):
        monkeypatch.setattr(arrays._Fast, name, None)  # restored afterwards
    arrays._Fast.armed = False
    caplog.clear()
    with caplog.at_level(logging.WARNING, "distributed.comm.asyncio"):
        arrays._arm()
    assert arrays._Fast.armed
    assert arrays._Fast.serialize is None and arrays._Fast.deserialize is None
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert f"distributed {distributed.__version__}" in record.getMessage()
    assert ("array: written differently from distributed's serialize_and_split"
            in record.getMessage())


def test_another_framing_is_caught(monkeypatch) -> None:
    add_header = internals.FRAMES_HEADER
    assert add_header is not None

    def changed(frames: list[Any]) -> Any:
        out, lengths, total = add_header(frames)
        return [b"\0" * 8, *out], lengths, total + 8

    monkeypatch.setattr(internals, "FRAMES_HEADER", changed)
    assert selfcheck.differences(MessageCodec) is None  # the codec is not the framing
    assert framing.difference() == "ping: the framing differs from distributed's tcp writer"


def test_the_takeover_checks_the_framing_once_and_warns(monkeypatch, caplog) -> None:
    add_header = internals.FRAMES_HEADER

    def changed(frames: list[Any]) -> Any:
        out, lengths, total = add_header(frames)
        return [b"\0" * 8, *out], lengths, total + 8

    monkeypatch.setattr(internals, "FRAMES_HEADER", changed)
    monkeypatch.setattr(framing, "_done", False)
    backend = takeover_backend(False)
    with caplog.at_level(logging.WARNING, "distributed.comm.asyncio"):
        backend.get_connector()
        backend.get_connector()
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "the wire framing differs (ping: the framing differs" in record.getMessage()
    assert f"distributed {distributed.__version__}" in record.getMessage()


async def test_a_comm_on_a_changed_release_writes_that_releases_bytes(monkeypatch) -> None:
    """Over a real connection: with the fast codec, the frames differ from those
    of a changed ``dumps``; with the codec the self-check chooses, they are its."""
    monkeypatch.setattr(distributed.protocol, "dumps",
                        _reversed_head(distributed.protocol.dumps))
    msg = {"op": "ping", "keys": {1, 2}, "reply": True}
    written: dict[str, list[bytes]] = {}
    for name, codec in [("fast", MessageCodec), ("chosen", codecs.decide()[0])]:
        monkeypatch.setattr(codecs, "FAST", codec)

        async def handle(comm: Any) -> None:
            await comm.write(msg)
            await comm.close()

        listener = listen("asyncio://127.0.0.1:0", handle)
        await listener.start()
        peer = RawPeer.connect(listener.contact_address)
        try:
            await peer.handshake()
            loop = asyncio.get_running_loop()
            while (frames := parse_frames(peer.buf)) is None:
                data = await asyncio.wait_for(loop.sock_recv(peer.sock, 1 << 16), WAIT)
                assert data, "closed before the message"
                peer.buf += data
            written[name] = frames
        finally:
            peer.close()
            listener.stop()
    context = {"sender": None, "recipient": None, **handshake_msg()}
    theirs = [bytes(f) for f in distributed.protocol.dumps(msg, context=context)]
    assert written["fast"] != theirs
    assert written["chosen"] == theirs


# --- names missing or changed, each case in a process of its own ----------------

#: (names hidden, the fast paths then off, whether the fast codec stays on).
CASES = [
    pytest.param(["dask._task_spec:Task"], {"by_value"}, True, id="task-spec"),
    pytest.param(["distributed.protocol.pickle:_DaskPickler"], {"by_value", "pickle_steps"},
                 True, id="dask-pickler"),
    pytest.param(["distributed.protocol.pickle:_always_use_pickle_for"],
                 {"by_value", "pickle_steps"}, True, id="always-use-pickle-for"),
    pytest.param(["copyreg:_extension_registry"], {"by_value"}, True, id="extension-registry"),
    pytest.param(["distributed.protocol.serialize:dask_serialize"],
                 {"by_value", "array_write"}, True, id="serialize-tables"),
    pytest.param(["distributed.protocol.serialize:dask_deserialize"], {"array_read"}, True,
                 id="deserialize-table"),
    pytest.param(["distributed.metrics:context_meter=changed"], {"meters"}, True,
                 id="meter-callbacks-changed"),
    pytest.param(["dask.sizeof:sizeof=changed", "dask.sizeof:sizeof_python_dict"], {"sizing"},
                 True, id="sizeof-table"),
    pytest.param(["distributed.comm.tcp:_add_frames_header"], set(), True, id="framing"),
    pytest.param(["distributed.comm.utils:OFFLOAD_THRESHOLD"], set(), False,
                 id="offload-threshold"),
    pytest.param(["distributed.protocol.serialize:_is_msgpack_serializable"], set(), False,
                 id="is-msgpack-serializable"),
    pytest.param(["distributed.protocol.utils:msgpack_opts"], {"array_read"}, False,
                 id="msgpack-opts"),
]


def _hidden(spec: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "tests.helpers_hidden", json.dumps(spec)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-5000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("spec, off, codec_on", CASES)
def test_a_missing_name_turns_its_fast_path_off(spec: list[str], off: set[str],
                                                codec_on: bool) -> None:
    report = _hidden(spec)
    hidden = {item.partition("=")[0].replace(":", ".") for item in spec}
    assert report["missing"] and all(
        any(m == h or m.startswith(h + ".") for h in hidden) for m in report["missing"])
    assert report["codec"] == ("MessageCodec" if codec_on else "StockCodec")
    assert {name for name, on in report["on"].items() if not on} == off
    [warning] = report["warnings"]
    assert report["release"] in warning
    assert all(m in warning for m in report["missing"])
    if codec_on:  # what is still on gives distributed's bytes
        assert report["differences"] == [None, None]
    assert report["round_trip"]


def test_with_nothing_hidden_nothing_is_off() -> None:
    """The control of the cases above: the same process, nothing hidden."""
    report = _hidden([])
    assert report["missing"] == [] and report["warnings"] == []
    assert report["codec"] == "MessageCodec" and report["on"] == ALL_ON
    assert report["differences"] == [None, None] and report["round_trip"]


def test_an_array_read_differently_is_caught(monkeypatch) -> None:
    """The read side of the arrays' own check: distributed's step made to read
    something else, the fast read no longer agrees with it."""
    ser = importlib.import_module("distributed.protocol.serialize")
    merge = ser.merge_and_deserialize

    def changed(*args: Any, **kwargs: Any) -> Any:
        return merge(*args, **kwargs)[::-1]

    monkeypatch.setattr(ser, "merge_and_deserialize", changed)
    assert arrays._difference(np) == (
        "array: read differently from distributed's merge_and_deserialize")

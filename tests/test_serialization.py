"""The fast serialization path produces distributed's bytes and objects exactly."""

from __future__ import annotations

import numpy as np
import pytest
from distributed.core import Status
from distributed.protocol import dumps, loads, to_serialize
from distributed.protocol.serialize import ToPickle

from asynciocomm.serialization import FALLBACK, MessageCodec


PLAIN = [
    {"op": "task-finished", "key": "('x', 1)", "nbytes": 8, "startstops": ({"action": "compute", "start": 1.0},)},
    {"op": "stream", "msgs": [{"op": "a"}, {"op": "b", "v": [1, 2, None, True, 1.5]}]},
    [{"op": "heartbeat"}] * 50,
    {"bin": b"\x00\xff" * 100, "str": "é" * 10, "big": 2**63 - 1},
    {"has__dunder": "a__b"},
]
SPECIAL = [
    {"s": {1, 2, 3}},
    {"e": Status.running},
    {"data": to_serialize(np.arange(10))},
    {"p": ToPickle(lambda: 1)},
]


@pytest.mark.parametrize("msg", PLAIN)
def test_plain_messages_pack_to_distributed_bytes(msg) -> None:
    frame = MessageCodec().dumps(msg)
    assert frame is not FALLBACK
    assert [frame] == dumps(msg)
    assert MessageCodec.loads([memoryview(bytearray(frame))], len(frame), True, None) == loads([frame])


@pytest.mark.parametrize("msg", SPECIAL)
def test_special_messages_fall_back(msg) -> None:
    codec = MessageCodec()
    assert codec.dumps(msg) is FALLBACK
    assert codec.dumps({"op": "after-failure"}) == dumps({"op": "after-failure"})[0]


@pytest.mark.parametrize("deserialize", [True, False])
def test_loads_matches_distributed_for_special_frames(deserialize: bool) -> None:
    msg = {"s": {1, 2}, "e": Status.running}
    frames = [memoryview(bytearray(f)) for f in dumps(msg)]
    nbytes = sum(f.nbytes for f in frames)
    assert MessageCodec.loads(frames, nbytes, deserialize, None) == loads(frames, deserialize=deserialize)

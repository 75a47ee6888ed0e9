"""Helpers shared by the decoder and encoder tests (and the codec fuzz test).

Every such test runs on each build: the pure-Python modules, and their compiled
twins when they are built. A :class:`Build` pairs the decoder and the encoder of
one build (both pure or both compiled), so a round trip encodes and decodes with
the same build.
"""

from __future__ import annotations

from types import ModuleType

import pytest
from distributed.comm.tcp import _add_frames_header

from asynciocomm.wire import decoder, encoder, speedups


class Build:
    """The decoder and the encoder of one build, under the names tests use."""

    def __init__(self, decoder_module: ModuleType, encoder_module: ModuleType) -> None:
        self.FrameDecoder = decoder_module.FrameDecoder
        self.encode_frames = encoder_module.encode_frames
        self.encode_single = encoder_module.encode_single
        self.encoder = encoder_module


PURE = Build(decoder, encoder)
#: The compiled twins (None when they are not built or pure Python is forced).
COMPILED = Build(speedups.decoder_impl, speedups.encoder_impl) if speedups.COMPILED else None

# The same tests run on the pure-Python modules and on their compiled twins.
BUILDS = [pytest.param(PURE, id="pure")]
if COMPILED is not None:
    BUILDS.append(pytest.param(COMPILED, id="compiled"))

MESSAGES = [
    pytest.param([b"x"], id="one-byte"),
    pytest.param([b""], id="one-empty"),
    pytest.param([b"", b"", b"a"], id="empties"),
    pytest.param([b"h" * 10, bytearray(b"d" * 100)], id="header+buffer"),
    pytest.param([b"h" * 10, bytearray(b"d" * 64)], id="exactly-direct"),
    pytest.param([b"a" * 63, b"b" * 63, b"c" * 63], id="run-split"),
    pytest.param([b"p" * 3000, bytearray(b"d" * 100), bytearray(b"e" * 5)],
                 id="pickle-then-buffers"),
    pytest.param([b"s" * 1000], id="larger-than-read-buffer"),
    pytest.param([bytes([i % 251]) * (i % 7) for i in range(200)], id="many-tiny"),
]


def wire(frames: list, impl: Build = PURE, coalesce: int = 16) -> bytes:
    buffers, total = impl.encode_frames(frames, coalesce=coalesce)
    data = b"".join(bytes(memoryview(b).cast("B")) for b in buffers)
    assert len(data) == total
    return data


def stock_wire(frames: list) -> bytes:
    out, _, _ = _add_frames_header(list(frames))
    return b"".join(bytes(memoryview(b).cast("B")) for b in out)

"""The sans-I/O encoder: messages in, the stock writer's bytes out."""

from __future__ import annotations

import numpy as np
import pytest

from asynciocomm import encoder, speedups
from asynciocomm.encoder import encode_header
from tests.helpers_wire import BUILDS, MESSAGES, stock_wire, wire

pytestmark = pytest.mark.parametrize("impl", BUILDS)


@pytest.mark.parametrize("frames", MESSAGES)
def test_bytes_identical_to_stock_writer(frames: list, impl) -> None:
    assert wire(frames, impl) == stock_wire(frames)


def test_encode_passes_large_frames_by_reference_as_bytes_views(impl) -> None:
    arr = np.arange(100_000, dtype="f8").reshape(100, 1000)
    frames = [b"hdr", memoryview(arr)]
    buffers, total = impl.encode_frames(frames, coalesce=1024)
    assert len(buffers) == 2
    assert buffers[0][:16] == encode_header(frames, [3, arr.nbytes])[:16]
    view = buffers[1]
    assert isinstance(view, memoryview) and view.ndim == 1 and view.format == "B"
    assert view.obj is arr or np.shares_memory(np.asarray(view), arr)
    assert total == 16 + 16 + 3 + arr.nbytes


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 5000])
def test_encode_single_matches_general_encoder(n: int, impl) -> None:
    frame = bytes(range(256)) * (n // 256) + b"z" * (n % 256)
    single, total = impl.encode_single(frame, coalesce=16)
    general, total2 = impl.encode_frames([frame], coalesce=16)
    assert total == total2
    assert b"".join(map(bytes, single)) == b"".join(map(bytes, general)) == stock_wire([frame])


def test_compiled_encoder_is_built_unless_pure_is_forced(impl) -> None:
    """CI installs with Cython and a compiler: the twin must really be there."""
    if speedups.FORCE_PURE:
        assert speedups.encoder_impl is encoder
    else:
        assert speedups.COMPILED, "asynciocomm._cencoder was not built"
        assert speedups.encoder_impl.__file__.endswith((".so", ".pyd"))

"""The sans-I/O encoder: messages in, the stock writer's bytes out."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asynciocomm.wire import encoder, speedups
from asynciocomm.wire.encoder import encode_header
from tests.helpers_wire import BUILDS, MESSAGES, stock_wire, wire

pytestmark = pytest.mark.parametrize("impl", BUILDS)


@pytest.mark.parametrize("frames", MESSAGES)
def test_bytes_identical_to_stock_writer(frames: list, impl) -> None:
    assert wire(frames, impl) == stock_wire(frames)


_FRAME = st.tuples(st.sampled_from(["bytes", "bytearray", "memoryview", "numpy"]),
                   st.integers(0, 3000))


def _frame(kind: str, size: int):
    data = bytes(i % 251 for i in range(size))
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(bytearray(data))
    return memoryview(np.frombuffer(data, dtype="u1").copy())


@settings(max_examples=200, deadline=None, derandomize=True)
@given(spec=st.lists(_FRAME, min_size=1, max_size=80), coalesce=st.sampled_from([16, 1024, 16384]))
def test_any_frames_encode_to_the_stock_writers_bytes(spec: list, coalesce: int, impl) -> None:
    """Any mix of frame types and sizes, up to 80 frames (past the cached header
    layouts), every coalescing bound: the stock writer's bytes."""
    frames = [_frame(kind, size) for kind, size in spec]
    assert wire(frames, impl, coalesce) == stock_wire(frames)


def test_the_header_layouts_kept_are_bounded(impl) -> None:
    bound = impl.encoder._STRUCTS_MAX
    for n in range(1, 3 * bound):
        frames = [b"f"] * n
        assert wire(frames, impl) == stock_wire(frames)
    assert 0 < len(impl.encoder._STRUCTS) < bound


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
        assert speedups.COMPILED, "asynciocomm.wire._cencoder was not built"
        assert speedups.encoder_impl.__file__.endswith((".so", ".pyd"))


def _strided_frames(layout: str, n: int) -> list:
    base = np.arange(2 * n, dtype="u1")
    strided = {"strided": base[::2], "2d-column": base.reshape(-1, 64)[:, ::2],
               "fortran": np.asfortranarray(base[:n].reshape(-1, 32))}[layout]
    return [b"msgpack header", b"sub-header", memoryview(strided)]


@pytest.mark.parametrize("layout", ["strided", "2d-column", "fortran"])
@pytest.mark.parametrize("n", [1024, 16 * 1024, 127 * 1024, 128 * 1024, 4 << 20])
def test_buffers_that_are_not_c_contiguous_are_taken_where_the_stock_writer_takes_them(
    layout: str, n: int, impl
) -> None:
    """The stock writer joins small messages (it raises TypeError then, before
    anything is sent) and copies such a buffer otherwise (ensure_memoryview)."""
    from distributed.comm.tcp import _add_frames_header
    from distributed.utils import ensure_memoryview

    frames = _strided_frames(layout, n)
    try:
        out, _, _ = _add_frames_header(list(frames))
        expected = b"".join(bytes(ensure_memoryview(b)) for b in out)
    except TypeError:
        with pytest.raises(TypeError, match="not C-contiguous"):
            impl.encode_frames(frames, coalesce=16 * 1024)
        return
    assert wire(frames, impl, coalesce=16 * 1024) == expected

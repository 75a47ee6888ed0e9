"""The sans-I/O decoder: no sockets, only bytes in and messages out."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from distributed.protocol import dumps, to_serialize
from hypothesis import given, settings
from hypothesis import strategies as st

from asynciocomm.errors import ProtocolError
from asynciocomm.wire import decoder, speedups
from tests.helpers_wire import BUILDS, MESSAGES, PURE, stock_wire, wire

pytestmark = pytest.mark.parametrize("impl", BUILDS)

SMALL = dict(read_buffer=256, direct_read=64)


def decode_all(
    data: bytes, splits: list[int] | None = None, impl=PURE, **kw
) -> list[list[bytes]]:
    dec = impl.FrameDecoder(**{**SMALL, **kw})
    if splits is None:
        dec.feed(data)
    else:
        pos = 0
        for cut in sorted(splits) + [len(data)]:
            dec.feed(data[pos:cut])
            pos = max(pos, cut)
    out = []
    while dec.messages:
        frames, nbytes = dec.pop()
        assert nbytes == sum(f.nbytes for f in frames)
        out.append([bytes(f) for f in frames])
    assert dec.at_boundary
    assert dec.queued_bytes == 0
    return out


@pytest.mark.parametrize("frames", MESSAGES)
@pytest.mark.parametrize("mode", ["whole", "bytewise", "random"])
def test_roundtrip_table(frames: list, mode: str, impl) -> None:
    data = wire(frames, impl)
    if mode == "whole":
        got = decode_all(data, impl=impl)
    elif mode == "bytewise":
        got = decode_all(data, splits=list(range(len(data))), impl=impl)
    else:
        rng = random.Random(len(data))
        got = decode_all(data, splits=[rng.randrange(len(data) + 1) for _ in range(7)], impl=impl)
    assert got == [[bytes(memoryview(f).cast("B")) for f in frames]]


def test_decodes_stock_writer_for_real_messages(impl) -> None:
    arr = np.arange(100_000, dtype="f8")
    msgs = [
        {"op": "ping"},
        {"op": "compute", "data": to_serialize(arr), "other": to_serialize(arr[:10])},
        {"x": [to_serialize(np.ones(i)) for i in range(20)]},
        {"pickled": to_serialize(object)},
    ]
    stream = b"".join(stock_wire(list(dumps(m))) for m in msgs)
    dec = impl.FrameDecoder(read_buffer=4096, direct_read=1024)
    rng = random.Random(0)
    pos = 0
    while pos < len(stream):
        step = rng.randrange(1, 5000)
        dec.feed(stream[pos : pos + step])
        pos += step
    for m in msgs:
        assert [bytes(f) for f in dec.pop()[0]] == [
            bytes(memoryview(f).cast("B")) for f in dumps(m)
        ]
    assert not dec.messages and dec.at_boundary


def test_many_messages_in_one_receive(impl) -> None:
    data = b"".join(wire([b"m%d" % i], impl) for i in range(10))
    dec = impl.FrameDecoder(read_buffer=4096, direct_read=512)
    buf = dec.get_buffer()
    buf[: len(data)] = data
    dec.buffer_updated(len(data))
    assert [bytes(dec.pop()[0][0]) for _ in range(10)] == [b"m%d" % i for i in range(10)]


def test_large_frames_get_own_buffers_and_are_written_in_place(impl) -> None:
    allocations: list[int] = []

    def alloc(n: int) -> memoryview:
        allocations.append(n)
        return memoryview(bytearray(n))

    small_shared = b"h" * 20
    big = bytearray(b"B" * 5000)  # first buffer: shared, like the stock reader
    later = bytearray(b"L" * 3000)  # a second buffer: its own allocation
    frames = [small_shared, big, later]
    data = wire(frames, impl)
    dec = impl.FrameDecoder(read_buffer=256, direct_read=64, allocate=alloc)
    header_len = 16 + 8 * 3
    dec.feed(data[: header_len + 30])
    # The shared region's buffer now receives the kernel's bytes directly.
    target = dec.get_buffer()
    assert allocations == [5020]
    assert target.nbytes == 5020 - 30
    target[:] = data[header_len + 30 : header_len + 5020]
    dec.buffer_updated(5020 - 30)
    dec.feed(data[header_len + 5020 :])
    out, _ = dec.pop()
    assert allocations == [5020, 3000]
    assert [bytes(f) for f in out] == [bytes(f) for f in frames]
    assert out[0].obj is out[1].obj is not out[2].obj
    assert all(not f.readonly for f in out)


def test_shards_of_one_buffer_land_contiguously(impl) -> None:
    """distributed splits a large buffer into shards and re-merges them; in one
    buffer that merge needs no copy (as with the stock reader)."""
    from distributed.protocol.utils import merge_memoryviews

    arr = np.arange(40_000, dtype="u1")
    view = memoryview(arr)
    frames = [b"hdr", view[:10_000], view[10_000:20_000], view[20_000:]]
    dec = impl.FrameDecoder(read_buffer=4096, direct_read=1024)
    dec.feed(wire(frames, impl))
    out, _ = dec.pop()
    merged = merge_memoryviews(out[1:])
    assert merged.obj is out[1].obj  # a view of the same buffer, not a copy
    assert bytes(merged) == arr.tobytes()


def test_small_shared_frames_share_one_buffer(impl) -> None:
    frames = [b"a" * 5, b"b" * 7, b"c" * 9]
    dec = impl.FrameDecoder(**SMALL)
    dec.feed(wire(frames, impl))
    out, _ = dec.pop()
    assert out[0].obj is out[1].obj is out[2].obj


@pytest.mark.parametrize("mode", ["whole", "bytewise", "odd-cuts"])
def test_header_larger_than_read_buffer(mode: str, impl) -> None:
    frames = [b"%d" % (i % 10) for i in range(500)]  # 4 KiB of lengths
    data = wire(frames, impl) * 2
    splits = {"whole": None, "bytewise": list(range(len(data))),
              "odd-cuts": list(range(3, len(data), 13))}[mode]
    assert decode_all(data, splits, impl=impl) == [frames, frames]


def test_a_claimed_header_holds_only_what_arrived(impl) -> None:
    """A header that claims a hundred million frames (800 MB of lengths, within
    the bounds) allocates nothing for them: its lengths are kept as they arrive."""
    import tracemalloc

    allocations: list[int] = []

    def alloc(n: int) -> memoryview:
        allocations.append(n)
        return memoryview(bytearray(n))

    n = 10**8
    dec = impl.FrameDecoder(**SMALL, max_frames=2 * n, max_message=2**40, allocate=alloc)
    tracemalloc.start()
    try:
        dec.feed(struct.pack("<QQ", 8 + 8 * n, n) + struct.pack("<100Q", *([0] * 100)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert allocations == [] and peak < 1 << 20, (allocations, peak)
    assert not dec.messages and not dec.at_boundary


def test_more_than_a_million_frames_are_decoded(impl) -> None:
    frames = [b"", b"ab"] * ((1 << 20) // 2 + 7)
    out = decode_all(wire(frames, impl), impl=impl, read_buffer=256 * 1024,
                     direct_read=64 * 1024)
    assert out == [frames]


@pytest.mark.parametrize(
    "header, match",
    [
        (struct.pack("<QQ", 8, 0), "zero frames"),
        (struct.pack("<QQ", 2**63, 2**63), "exceed the bound"),
        (struct.pack("<QQ", 16, 10**9), "exceed the bound"),
        (struct.pack("<QQ", 4, 1), "prefix 4 inconsistent"),
        (struct.pack("<QQ", 2**62, 1), "inconsistent"),
        (struct.pack("<QQQ", 16 + 3, 1, 5), "frame boundary"),
        (struct.pack("<QQQ", 16 + 5, 1, 2**40), "exceeds the bound"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "exceed the bound"),
    ],
)
def test_malformed_headers_raise_and_allocate_nothing(header: bytes, match: str, impl) -> None:
    allocations: list[int] = []

    def alloc(n: int) -> memoryview:
        allocations.append(n)
        return memoryview(bytearray(n))

    dec = impl.FrameDecoder(**SMALL, max_frames=1000, max_message=2**30, allocate=alloc)
    with pytest.raises(ProtocolError, match=match):
        dec.feed(header)
    assert allocations == []
    with pytest.raises(ProtocolError):
        dec.feed(b"more")


@pytest.mark.parametrize(
    "data, match",
    [
        # A one-frame message received whole, after a good one, takes the same
        # checks as one received in pieces.
        (struct.pack("<QQQ", 16 + 3, 1, 5) + b"12345", "frame boundary"),
        (struct.pack("<QQQ", 16 + 7, 1, 5) + b"12345" + b"xx", "frame boundary"),
        (struct.pack("<QQQ", 16 + 40, 1, 40) + b"y" * 40, "inconsistent"),
    ],
    ids=["short-prefix", "long-prefix", "above-max-message"],
)
def test_whole_one_frame_messages_are_checked_like_split_ones(
    data: bytes, match: str, impl
) -> None:
    good = wire([b"ok"], impl)
    dec = impl.FrameDecoder(read_buffer=256, direct_read=64, max_message=32)
    with pytest.raises(ProtocolError, match=match):
        dec.feed(good + data)
    assert [bytes(f) for f in dec.pop()[0]] == [b"ok"]
    assert not dec.messages


def test_a_large_one_frame_message_received_whole_gets_its_own_buffer(impl) -> None:
    allocations: list[int] = []

    def alloc(n: int) -> memoryview:
        allocations.append(n)
        return memoryview(bytearray(n))

    payload = bytes(range(100))
    data = wire([b"s"], impl) + wire([bytearray(payload)], impl) + wire([b"t"], impl)
    dec = impl.FrameDecoder(read_buffer=256, direct_read=64, allocate=alloc)
    buf = dec.get_buffer()
    buf[: len(data)] = data  # all three messages in one receive
    dec.buffer_updated(len(data))
    assert allocations == [100]
    out = [dec.pop()[0] for _ in range(3)]
    assert [[bytes(f) for f in m] for m in out] == [[b"s"], [payload], [b"t"]]
    assert type(out[0][0].obj) is bytearray and type(out[2][0].obj) is bytearray
    assert out[1][0].obj is not out[0][0].obj


def test_truncation_is_visible(impl) -> None:
    data = wire([b"abc", bytearray(b"x" * 100)], impl)
    dec = impl.FrameDecoder(**SMALL)
    dec.feed(data[:-1])
    assert not dec.at_boundary
    assert dec.buffered_partial > 0
    assert not dec.messages


def test_config_bound_check(impl) -> None:
    with pytest.raises(ValueError):
        impl.FrameDecoder(read_buffer=100, direct_read=80)


frame_st = st.one_of(
    st.binary(max_size=300),
    st.binary(max_size=300).map(bytearray),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    msgs=st.lists(st.lists(frame_st, min_size=1, max_size=12), min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=30),
    direct=st.sampled_from([16, 64, 128]),
)
def test_hypothesis_roundtrip(msgs: list, cuts: list, direct: int, impl) -> None:
    data = b"".join(wire(m, impl) for m in msgs)
    got = decode_all(
        data,
        splits=[c % (len(data) + 1) for c in cuts],
        impl=impl,
        read_buffer=256,
        direct_read=direct,
    )
    assert got == [[bytes(f) for f in m] for m in msgs]
    assert data == b"".join(stock_wire(m) for m in msgs)


def test_compiled_decoder_is_built_unless_pure_is_forced(impl) -> None:
    """CI installs with Cython and a compiler: the twin must really be there."""
    if speedups.FORCE_PURE:
        assert speedups.decoder_impl is decoder
    else:
        assert speedups.COMPILED, "asynciocomm.wire._cdecoder was not built"
        assert speedups.decoder_impl.__file__.endswith((".so", ".pyd"))


def test_large_buffers_are_allocated_whether_or_not_earlier_messages_are_read(impl) -> None:
    """A large frame gets its own buffer as soon as its length is known, with
    earlier messages unread: the decoder never waits for its reader (a peer that
    writes, then reads, must not wait for this side's application)."""
    allocations: list[int] = []

    def alloc(n: int) -> memoryview:
        allocations.append(n)
        return memoryview(bytearray(n))

    big = 1 << 20
    first = wire([b"first"], impl)
    small = wire([b"h" * 10, bytearray(b"b" * 100)], impl)  # direct, but cheap
    second = wire([b"h" * 10, bytearray(b"B" * big)], impl)
    third = wire([bytearray(b"L" * big)], impl)
    dec = impl.FrameDecoder(read_buffer=256, direct_read=64, allocate=alloc)
    dec.feed(first + small + second[:50])
    # Each message's shared region (header frame + its buffer) is one block.
    assert len(dec.messages) == 2 and allocations == [110, 10 + big]
    dec.feed(second[50:] + third[:40])
    assert len(dec.messages) == 3 and allocations == [110, 10 + big, big]
    dec.feed(third[40:])
    got = [[bytes(f) for f in dec.pop()[0]] for _ in range(4)]
    assert got == [[b"first"], [b"h" * 10, b"b" * 100], [b"h" * 10, b"B" * big], [b"L" * big]]
    assert dec.at_boundary and dec.queued_bytes == 0


def test_queued_one_frame_messages_are_invisible_to_the_gc(impl) -> None:
    """Thousands of small messages queued before the reader runs (uvloop reads
    up to 32 times per wake-up) hold no object the garbage collector tracks, so
    they trigger no collection and are never promoted to an older generation.
    Messages of several frames may hold tracked lists; they are taken the same
    way."""
    import gc

    n = 5000
    small = b"".join(wire([b"m%05d" % i]) for i in range(n))
    multi = wire([b"head", b"tail"])
    dec = impl.FrameDecoder(read_buffer=1 << 20, direct_read=1 << 16)
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        dec.feed(small)
        grown = len(gc.get_objects()) - before
    finally:
        gc.enable()
    assert len(dec.messages) == n
    assert grown < 50, grown  # was 15,000: a list, a memoryview and its buffer each
    dec.feed(multi)
    got = []
    while dec.messages:
        frames, nbytes = dec.pop()
        assert all(type(f) is memoryview and not f.readonly for f in frames)
        assert nbytes == sum(f.nbytes for f in frames)
        got.append([bytes(f) for f in frames])
    assert got == [[b"m%05d" % i] for i in range(n)] + [[b"head", b"tail"]]
    assert dec.queued_bytes == 0 and dec.at_boundary

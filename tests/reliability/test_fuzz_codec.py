"""A hypothesis state machine drives the decoder and the encoder (pure and compiled)
with arbitrary splits, interleaved reads and pops, and flipped bytes.

A byte flipped in a frame's payload must give a message of the same frame lengths
with exactly that byte changed (the oracle is patched and stays exact). A byte
flipped in a header (prefix, frame count, lengths) may give anything but a crash:
the only exception allowed is ProtocolError, after which every further input is
refused with ProtocolError too. Small bounds (max_message 64 KiB) keep memory
bounded whatever a corrupted length claims. ``derandomize=True`` and no example
database make every CI run try the same cases.
"""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from asynciocomm.errors import ProtocolError
from tests.helpers_wire import COMPILED, PURE

MAX_MESSAGE = 64 * 1024
SETTINGS = settings(derandomize=True, database=None, max_examples=120,
                    stateful_step_count=60, deadline=None,
                    suppress_health_check=list(HealthCheck))

frames_st = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.binary(min_size=60, max_size=300),
        st.integers(0, 2000).map(lambda n: bytearray(b"\xab" * n)),
    ),
    min_size=1, max_size=6,
)


class CodecMachine(RuleBasedStateMachine):
    impl = PURE

    def __init__(self) -> None:
        super().__init__()
        self.dec = self.impl.FrameDecoder(read_buffer=256, direct_read=64, max_frames=64,
                                          max_message=MAX_MESSAGE)
        self.pending = bytearray()  # encoded, not yet fed
        # byte kinds of pending: for each pending byte, (message index, frame index,
        # offset in frame) for payload bytes, None for header bytes
        self.where: list[tuple[int, int, int] | None] = []
        self.expected: deque[list[bytearray]] = deque()
        self.n_added = 0
        self.n_popped = 0
        self.header_corrupted = False
        self.failed = False

    # -- input ------------------------------------------------------------------

    @rule(frames=frames_st)
    def add_message(self, frames) -> None:
        buffers, total = self.impl.encode_frames(frames, 16)
        data = b"".join(bytes(memoryview(b).cast("B")) for b in buffers)
        assert len(data) == total
        hlen = 16 + 8 * len(frames)
        self.pending += data
        self.where += [None] * hlen
        for i, f in enumerate(frames):
            self.where += [(self.n_added, i, k) for k in range(len(f))]
        self.expected.append([bytearray(f) for f in frames])
        self.n_added += 1

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except ProtocolError:
            assert self.header_corrupted, "ProtocolError on a valid stream"
            self.failed = True
            return None

    @precondition(lambda self: self.pending)
    @rule(n=st.integers(1, 700), partial=st.booleans())
    def feed(self, n, partial) -> None:
        chunk = bytes(self.pending[:n])
        del self.pending[:n]
        del self.where[:n]
        pos = 0
        for _ in range(10_000):  # bounded: every step writes at least one byte
            if pos >= len(chunk):
                break
            if self.failed:
                with pytest.raises(ProtocolError):
                    self.dec.feed(chunk[pos:])
                return
            dst = self._guard(self.dec.get_buffer)
            if dst is None:
                return
            assert dst.nbytes > 0
            k = min(dst.nbytes, len(chunk) - pos)
            if partial and k > 1:
                k = max(1, k // 2)  # the kernel filled part of what was offered
            dst[:k] = chunk[pos : pos + k]
            pos += k
            self._guard(self.dec.buffer_updated, k)
        else:
            raise AssertionError("feed did not progress")

    @precondition(lambda self: self.pending)
    @rule(data=st.data(), bit=st.integers(0, 7))
    def corrupt(self, data, bit) -> None:
        i = data.draw(st.integers(0, len(self.pending) - 1))
        self.pending[i] ^= 1 << bit
        w = self.where[i]
        if w is None:
            self.header_corrupted = True
            return
        msg, frame, off = w
        idx = msg - self.n_popped
        if not self.header_corrupted and 0 <= idx < len(self.expected):
            self.expected[idx][frame][off] ^= 1 << bit

    # -- output -----------------------------------------------------------------

    @rule()
    def pop(self) -> None:
        if not self.dec.messages:
            return
        frames, nbytes = self.dec.pop()
        assert nbytes == sum(f.nbytes for f in frames)
        for f in frames:
            f[:1] = f[:1]  # writable
        if not self.header_corrupted:
            want = self.expected.popleft()
            assert [len(f) for f in frames] == [len(f) for f in want]
            assert [bytes(f) for f in frames] == [bytes(f) for f in want]
        elif self.expected:
            self.expected.popleft()
        self.n_popped += 1

    @invariant()
    def accounting(self) -> None:
        # A queued message is a list of frames, or a one-frame message's bare
        # bytearray (see FrameDecoder._complete_block).
        assert self.dec.queued_bytes == sum(
            len(m) if type(m) is bytearray else sum(f.nbytes for f in m)
            for m in self.dec.messages)
        assert self.dec.queued_bytes <= MAX_MESSAGE * max(1, len(self.dec.messages))

    def teardown(self) -> None:
        if self.header_corrupted or self.failed:
            return
        # a valid stream: feed the rest, drain, and the decoder is at a boundary
        self.feed(len(self.pending) + 1, False)
        while self.dec.messages:
            self.pop()
        assert not self.expected
        assert self.dec.at_boundary


class PureCodec(CodecMachine):
    impl = PURE


TestPureCodec = PureCodec.TestCase
TestPureCodec.settings = SETTINGS

if COMPILED is not None:

    class CompiledCodec(CodecMachine):
        impl = COMPILED

    TestCompiledCodec = CompiledCodec.TestCase
    TestCompiledCodec.settings = SETTINGS

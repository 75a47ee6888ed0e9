"""The codec's continuation: awaited, it runs its coroutine; dropped, it leaves none."""

from __future__ import annotations

import gc
import warnings

import pytest
from distributed.protocol import dumps, to_serialize

from asynciocomm.serialization.continuation import Continuation
from asynciocomm.serialization.fast import MessageCodec
from asynciocomm.serialization.stock import StockCodec


async def test_awaiting_runs_the_function_once_with_its_arguments() -> None:
    calls: list[tuple] = []

    async def function(*args: object) -> str:
        calls.append(args)
        return "done"

    later = Continuation(function, 1, "two")
    assert await later == "done"
    assert calls == [(1, "two")]


def test_a_dropped_continuation_leaves_no_coroutine_unawaited() -> None:
    async def function() -> None:
        raise AssertionError("never run")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would raise
        later = Continuation(function)
        del later
        gc.collect()


async def test_the_stock_codec_hands_every_message_to_distributed() -> None:
    class Comm:
        allow_offload = False
        local_info = remote_info = {}
        handshake_options: dict = {}
        max_shard_size = 2**20

    msg = {"op": "x", "data": to_serialize(b"abc")}
    later = StockCodec().dumps(msg, Comm())
    assert isinstance(later, Continuation)
    frames = await later
    assert [bytes(f) for f in frames] == [bytes(f) for f in dumps(msg)]
    read = StockCodec.loads(frames, sum(map(len, frames)), True, None, False)
    assert isinstance(read, Continuation)
    assert (await read)["data"] == b"abc"


@pytest.mark.parametrize("codec", [MessageCodec, StockCodec])
def test_a_message_that_needs_distributeds_path_gets_a_continuation(codec: type) -> None:
    assert isinstance(codec().dumps({"bad": object()}), Continuation)

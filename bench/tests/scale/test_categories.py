"""The scale categories: the comm's (de)serialization split three ways."""

from __future__ import annotations

import pytest

from asynciocomm_bench.scale import categories

from ..profile.test_speedscope import SITE, STD, f

WRITE = [f("BatchedSend._background_send", SITE + "distributed/batched.py"),
         f("TCP.write", SITE + "distributed/comm/tcp.py"),
         f("to_frames", SITE + "distributed/comm/utils.py"),
         f("dumps", SITE + "distributed/protocol/core.py")]
ASYNCIO_WRITE = [f("BatchedSend._background_send", SITE + "distributed/batched.py"),
                 f("AsyncioComm.write", "/src/asynciocomm/comm.py"),
                 f("MessageCodec.dumps", "/src/asynciocomm/serialization/fast.py")]
PACK = f("Packer__pack", "msgpack/_cmsgpack.c")


@pytest.mark.parametrize("stack, expected", [
    # stock: a Task spec pickled under msgpack's default hook
    (WRITE + [f("packb", SITE + "msgpack/__init__.py"), PACK,
              f("dumps.<locals>._encode_default", SITE + "distributed/protocol/core.py"),
              f("dumps.<locals>.create_pickled_sub_frames",
                SITE + "distributed/protocol/core.py"),
              f("dumps", SITE + "distributed/protocol/pickle.py"),
              f("dumps", SITE + "cloudpickle/cloudpickle.py"),
              f("save", "/tmp/Python-3.11.7/Modules/_pickle.c")],
     ("comm write", "task specs (pickle)")),
    # the sub-header's msgpack inside the ToPickle path still counts as the task spec's
    (WRITE + [PACK, f("dumps.<locals>.create_pickled_sub_frames",
                      SITE + "distributed/protocol/core.py"), PACK],
     ("comm write", "task specs (pickle)")),
    (WRITE + [f("packb", SITE + "msgpack/__init__.py"), PACK],
     ("comm write", "msgpack")),
    (WRITE, ("comm write", "other (de)serialization")),
    # asynciocomm's codec: its in-band pickle, and plain msgpack
    (ASYNCIO_WRITE + [PACK, f("_pickle_inband", "/src/asynciocomm/serialization/fast.py"),
                      f("dumps", STD + "pickle.py")],
     ("comm write", "task specs (pickle)")),
    (ASYNCIO_WRITE + [PACK], ("comm write", "msgpack")),
    # reads: msgpack's unpacker
    ([f("TCP.read", SITE + "distributed/comm/tcp.py"),
      f("from_frames", SITE + "distributed/comm/utils.py"),
      f("loads", SITE + "distributed/protocol/core.py"),
      f("unpack_execute", "msgpack/unpack_template.h")], ("comm read", "msgpack")),
    # transport: no serialization frame, the category stays the comm's
    ([f("TCP.write", SITE + "distributed/comm/tcp.py"),
      f("send", "/usr/lib/x86_64-linux-gnu/libc.so.6")], ("comm write", "comm write")),
    # pickle outside the comm is not the comm's
    ([f("Scheduler.update_graph", SITE + "distributed/scheduler.py"),
      f("loads", SITE + "distributed/protocol/pickle.py")], ("update_graph", "update_graph")),
])
def test_flat_category(stack: list[dict[str, str]], expected: tuple[str, str]) -> None:
    assert categories.flat_category(stack) == expected


def test_shares_sum_to_one_and_comm_share(speedscope_file) -> None:
    from asynciocomm_bench.profile import speedscope

    a = categories.analyze(speedscope.load(speedscope_file))
    assert set(a["flat_shares"]) == set(categories.FLAT)
    assert abs(sum(a["flat_shares"].values()) - 1.0) < 1e-9
    base = a["shares"]
    assert a["comm_share"] == pytest.approx(
        base["comm read"] + base["comm write"] + base["comm other"])
    ser = sum(a["flat_shares"][p] for p in categories.SER_PARTS)
    assert ser == pytest.approx(a["comm_parts"]["(de)serialization"], abs=0.02)
    assert a["flat_shares"]["task specs (pickle)"] > 0

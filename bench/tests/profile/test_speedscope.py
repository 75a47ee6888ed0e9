"""The speedscope analyzer, on synthetic stacks and on a real py-spy file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asynciocomm_bench.profile import speedscope as ss

SITE = "/venv/lib/python3.11/site-packages/"
STD = "/usr/lib/python3.11/"


def f(name: str, file: str) -> dict[str, str]:
    return {"name": name, "file": file}


ROOT = [f("<module>", SITE + "distributed/cli/dask_scheduler.py"),
        f("BaseEventLoop.run_forever", STD + "asyncio/base_events.py"),
        f("BaseEventLoop._run_once", STD + "asyncio/base_events.py"),
        f("Handle._run", STD + "asyncio/events.py")]


@pytest.mark.parametrize("stack, expected", [
    # stock tcp comm: read, and deserialization under it
    ([f("Server.handle_stream", SITE + "distributed/core.py"),
      f("TCP.read", SITE + "distributed/comm/tcp.py"),
      f("from_frames", SITE + "distributed/comm/utils.py"),
      f("loads", SITE + "distributed/protocol/core.py")], "comm read"),
    ([f("BatchedSend._background_send", SITE + "distributed/batched.py"),
      f("TCP.write", SITE + "distributed/comm/tcp.py"),
      f("to_frames", SITE + "distributed/comm/utils.py")], "comm write"),
    # tornado iostream callbacks
    ([f("BaseIOStream._handle_events", SITE + "tornado/iostream.py"),
      f("BaseIOStream._handle_read", SITE + "tornado/iostream.py")], "comm read"),
    ([f("BaseIOStream._handle_events", SITE + "tornado/iostream.py"),
      f("BaseIOStream._handle_write", SITE + "tornado/iostream.py")], "comm write"),
    # asynciocomm: protocol callbacks and its own read/write paths
    ([f("_SelectorSocketTransport._read_ready", STD + "asyncio/selector_events.py"),
      f("_SelectorSocketTransport._read_ready__get_buffer", STD + "asyncio/selector_events.py"),
      f("CommProtocol.buffer_updated", "/work/main/asynciocomm/protocol.py"),
      f("loads", SITE + "distributed/protocol/core.py")], "comm read"),
    ([f("CommProtocol.get_buffer", "/work/main/asynciocomm/protocol.py")], "comm read"),
    ([f("CommProtocol.data_received", "/work/main/asynciocomm/protocol.py")], "comm read"),
    ([f("_SelectorSocketTransport._write_ready", STD + "asyncio/selector_events.py")],
     "comm write"),
    ([f("AsyncioComm.write", "/work/main/asynciocomm/comm.py"),
      f("dumps", SITE + "distributed/protocol/core.py")], "comm write"),
    ([f("AsyncioComm._close_quietly", "/work/main/asynciocomm/comm.py")], "comm other"),
    # scheduler work
    ([f("Server.handle_stream", SITE + "distributed/core.py"),
      f("Scheduler.handle_task_finished", SITE + "distributed/scheduler.py"),
      f("SchedulerState._transition", SITE + "distributed/scheduler.py")], "transitions"),
    ([f("Scheduler.update_graph", SITE + "distributed/scheduler.py"),
      f("Scheduler._create_taskstate_from_graph", SITE + "distributed/scheduler.py")],
     "update_graph"),
    # GC (native frames) wins over everything
    ([f("SchedulerState._transition", SITE + "distributed/scheduler.py"),
      f("gc_collect_main", "/lib/libpython3.11.so.1.0")], "gc"),
    # idle
    ([f("EpollSelector.select", STD + "selectors.py")], "idle"),
    ([f("something", SITE + "distributed/utils.py")], "other"),
])
def test_categorize(stack: list[dict[str, str]], expected: str) -> None:
    assert ss.categorize(ROOT + stack) == expected


def test_uvloop_idle_is_runner_leaf() -> None:
    stack = [f("<module>", SITE + "distributed/cli/dask_scheduler.py"),
             f("asyncio_run", SITE + "distributed/compatibility.py"),
             f("Runner.run", STD + "asyncio/runners.py")]
    assert ss.categorize(stack) == "idle"


def test_update_graph_parts() -> None:
    inside = ROOT + [f("Scheduler.update_graph", SITE + "distributed/scheduler.py"),
                     f("Scheduler._generate_taskstates", SITE + "distributed/scheduler.py")]
    assert ss.update_graph_part(inside) == "new tasks"
    assert ss.update_graph_part(inside[:-1]) == "other"
    assert ss.update_graph_part(ROOT) is None
    assert ss.offload_part([f("order", SITE + "dask/order.py")]) == "order (offload thread)"
    assert ss.offload_part([f("_materialize_graph", SITE + "distributed/scheduler.py")]) \
        == "unpack (offload thread)"


def _doc(stacks: list[list[dict[str, str]]]) -> dict:
    frames: list[dict[str, str]] = []
    samples = []
    for st in stacks:
        idx = []
        for fr in st:
            if fr not in frames:
                frames.append(fr)
            idx.append(frames.index(fr))
        samples.append(idx)
    return {"shared": {"frames": frames}, "profiles": [
        {"type": "sampled", "name": 'Thread 1 "Dask-Offload_0"', "samples": [samples[0]],
         "weights": [0.01]},
        {"type": "sampled", "name": 'Thread 2 "MainThread"', "samples": samples,
         "weights": [0.01] * len(samples)}]}


def test_analyze_synthetic_counts() -> None:
    read = ROOT + [f("TCP.read", SITE + "distributed/comm/tcp.py")]
    idle = ROOT[:3] + [f("EpollSelector.select", STD + "selectors.py")]
    res = ss.analyze(_doc([read, read, read, idle]))
    assert res["thread"] == 'Thread 2 "MainThread"'
    assert res["samples"] == 4
    assert res["shares"]["comm read"] == pytest.approx(0.75)
    assert res["shares"]["idle"] == pytest.approx(0.25)
    assert sum(res["shares"].values()) == pytest.approx(1.0)
    assert res["busy_shares"]["comm read"] == pytest.approx(1.0)


def test_real_pyspy_file(speedscope_file: Path) -> None:
    assert speedscope_file.stat().st_size < 200_000
    doc = ss.load(speedscope_file)
    assert doc["exporter"].startswith("py-spy")
    res = ss.analyze(doc)
    assert "MainThread" in res["thread"]
    assert res["samples"] == len(ss.main_thread(doc)["samples"]) > 50
    assert sum(res["shares"].values()) == pytest.approx(1.0)
    # the scheduler of a wide workload reads, writes, transitions and updates graphs
    for cat in ("comm read", "comm write", "transitions", "update_graph", "gc", "idle"):
        assert res["shares"][cat] > 0, cat
    # most busy samples fall in a named category, not "other"
    busy = res["busy_shares"]
    assert busy["other"] < 0.5


def test_load_rejects_non_speedscope(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"a": 1}))
    with pytest.raises(ValueError):
        ss.load(p)


@pytest.mark.parametrize("stack,expected", [
    # stock: tcp.py write -> to_frames -> protocol.dumps -> msgpack
    ([f("TCP.write", SITE + "distributed/comm/tcp.py"),
      f("to_frames", SITE + "distributed/comm/utils.py"),
      f("dumps", SITE + "distributed/protocol/core.py")], "(de)serialization"),
    # stock: the socket write itself
    ([f("TCP.write", SITE + "distributed/comm/tcp.py"),
      f("IOStream.write", SITE + "tornado/iostream.py"),
      f("write_to_fd", SITE + "tornado/iostream.py")], "transport"),
    # ours: the fast path pickling a task spec
    ([f("AsyncioComm.write", SITE + "asynciocomm/comm.py"),
      f("MessageCodec.dumps", SITE + "asynciocomm/serialization/fast.py"),
      f("Task.__getstate__", SITE + "dask/_task_spec.py")], "(de)serialization"),
    # ours: a native msgpack frame below the read
    ([f("AsyncioComm.read", SITE + "asynciocomm/comm.py"),
      f("unpackb", SITE + "msgpack/_cmsgpack.cpython-311-x86_64-linux-gnu.so")],
     "(de)serialization"),
    ([f("FramedProtocol.buffer_updated", SITE + "asynciocomm/protocol.py")], "transport"),
    # the stock writer's framing helper lives in distributed/protocol, but frames
    ([f("TCP.write", SITE + "distributed/comm/tcp.py"),
      f("pack_frames_prelude", SITE + "distributed/protocol/utils.py")], "transport"),
    # not a comm sample at all
    ([f("dumps", SITE + "distributed/protocol/core.py")], None),
])
def test_comm_part(stack: list[dict[str, str]], expected: str | None) -> None:
    assert ss.comm_part(ROOT + stack) == expected


def test_comm_parts_add_up_to_the_comm_shares(speedscope_file: Path) -> None:
    res = ss.analyze(ss.load(speedscope_file))
    parts = res["comm_parts"]
    assert sum(parts.values()) == pytest.approx(
        res["shares"]["comm read"] + res["shares"]["comm write"])
    # the stock comm of a wide workload spends time on both sides of the line
    assert parts["transport"] > 0 and parts["(de)serialization"] > 0

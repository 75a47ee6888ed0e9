"""What proves a run's comm: the witness records of every role, and the preloads."""

from __future__ import annotations

from typing import Any

import dask

from asynciocomm_bench.ab import suite

TCP = "distributed.comm.tcp"


def _rec(role: str, pid: int, ours: bool) -> dict[str, Any]:
    if ours:
        return {"role": role, "pid": pid,
                "backends": {"tcp": "asynciocomm.backend.TakeoverBackend"},
                "listeners": ["asynciocomm.listener.AsyncioListener"],
                "comms": ["asynciocomm.comm.AsyncioComm"]}
    return {"role": role, "pid": pid, "backends": {"tcp": f"{TCP}.TCPBackend"},
            "listeners": [f"{TCP}.TCPListener"], "comms": [f"{TCP}.TCP"]}


def test_every_role_must_show_the_sides_comm() -> None:
    stock = [_rec("scheduler", 1, False), _rec("worker", 2, False), _rec("client", 1, False)]
    ours = [_rec("scheduler", 1, True), _rec("worker", 2, True), _rec("client", 1, True)]
    assert suite.problems(stock, 0) == [] and suite.problems(ours, 1) == []
    assert suite.problems(stock, 1)[0].startswith("scheduler (pid 1): tcp:// is served by")
    mixed = [*ours[:2], _rec("client", 1, False)]
    assert "client (pid 1) used distributed.comm.tcp.TCP" in suite.problems(mixed, 1)
    assert suite.problems(ours[:2], 1) == ["no client witnessed"]
    inproc = [{**r, "comms": ["distributed.comm.inproc.InProc"]} for r in stock]
    assert any("which the takeover does not replace" in p for p in suite.problems(inproc, 0))


def test_preloads_come_first_and_keep_the_users() -> None:
    with dask.config.set({"distributed.worker.preload": ["mine"],
                          "distributed.worker.preload-argv": [["--x"]]}):
        stock, ours = suite.preload_env(0), suite.preload_env(1)
    assert stock["DASK_DISTRIBUTED__WORKER__PRELOAD"] == "['asynciocomm_bench.ab.witness', 'mine']"
    assert ours["DASK_DISTRIBUTED__WORKER__PRELOAD"] == (
        "['asynciocomm.preload', 'asynciocomm_bench.ab.witness', 'mine']")
    assert ours["DASK_DISTRIBUTED__WORKER__PRELOAD_ARGV"] == "[[], [], ['--x']]"
    assert ours["DASK_DISTRIBUTED__CLIENT__PRELOAD"].startswith("['asynciocomm.preload'")
    assert set(ours) >= {f"DASK_DISTRIBUTED__{r}__PRELOAD"
                         for r in ("SCHEDULER", "WORKER", "NANNY", "CLIENT")}

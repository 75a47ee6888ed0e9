"""The warm A/B (asynciocomm_bench.workloads.warm) at a small size: both comms'
clusters, the rounds timed on each, the comm each side used, the ratios."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("tls", [False, True])
def test_warm_ab_times_both_comms_and_tells_which_ran(tls: bool) -> None:
    argv = [sys.executable, "-m", "asynciocomm_bench.workloads.warm", "set_index,single_future",
            "uvloop", "2", "--scale", "0.01"] + (["--tls"] if tls else [])
    run = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert [r["workload"] for r in rows] == ["set_index", "single_future"]
    stock = "distributed.comm.tcp." + ("TLS" if tls else "TCP")
    for r in rows:
        assert r["loop"] == "uvloop" and r["tls"] is tls and r["rounds"] == 2
        assert r["comms"] == {"stock": stock, "asynciocomm": "asynciocomm.comm.AsyncioComm"}
        assert len(r["stock_s"]) == len(r["asynciocomm_s"]) == 2
        assert all(t > 0 for t in r["stock_s"] + r["asynciocomm_s"])
        ratios = [a / b for a, b in zip(r["stock_s"], r["asynciocomm_s"])]
        assert min(ratios) == r["ratio_range"][0] and max(ratios) == r["ratio_range"][1]

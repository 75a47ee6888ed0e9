"""End to end at a small size: every workload right on asynciocomm, and the A/B
of two workloads on both comms, plain and TLS, with its checks and report."""

from __future__ import annotations

from pathlib import Path

from asynciocomm_bench import cli
from asynciocomm_bench.common.results import load
from asynciocomm_bench.report import ratios
from asynciocomm_bench.workloads import catalog, plans
from asynciocomm_bench.workloads.answers import differences

SCALE = 0.01


def _plan(mode: str, names: list[str]) -> dict:
    runs = [{"index": i, "workload": n, "scheme": "asyncio", "loop": "uvloop"}
            for i, n in enumerate(names)]
    return {"mode": mode, "loop": "uvloop", "workers": 2, "threads": 1, "scale": SCALE,
            "timeout_s": 120, "tls": None, "runs": runs}


def test_every_workload_is_right_on_asynciocomm(tmp_path: Path) -> None:
    """Each workload on a fresh cluster of worker processes on asyncio://, warm-up
    included, gives its right answer, on the loop asked for."""
    names = [w.name for w in catalog.all_workloads()]
    want = plans.run_plan(_plan("expected", names), tmp_path / "expected.log")
    got = plans.run_plan(_plan("measure", names), tmp_path / "runs.log")
    for w, g in zip(want, got):
        assert "error" not in g and "error" not in w, (g.get("error"), w.get("error"))
        assert differences(g["answer"], w["answer"]) == [], g["workload"]
        assert g["wall_s"] > 0 and g["loop_cpu_s"] > 0
        assert g["evidence"]["scheduler"] == "uvloop.Loop"
        assert g["evidence"]["workers"] == ["uvloop.Loop"]
        assert g["evidence"]["client_comm"] == "asynciocomm.comm.AsyncioComm"
        assert g["evidence"]["scheduler_listeners"] == ["asynciocomm.listener.AsyncioListener"]


def test_pairs_on_both_comms_plain_and_tls(tmp_path: Path) -> None:
    """One pair of two workloads on the asyncio loop, plain and TLS: every answer
    right and the same on both comms, a sample per run, a ratio row per workload
    and statistic, and the stock comm's classes where it ran."""
    rc = cli.main(["workloads", "--scale", str(SCALE), "--pairs", "1", "--loops", "asyncio",
                   "--only", "single_future,df_shuffle", "--quiet", "--out", str(tmp_path)])
    assert rc == 0
    doc = load(tmp_path)
    sec = doc["workloads"]
    assert sec["errors"] == []
    assert sec["checks"] == {n: {"runs": 4, "right": 4, "same": 4}
                             for n in ("single_future", "df_shuffle")}
    assert len(sec["samples"]) == 2 * 2 * 4
    comms = {(r["scheme"], r["evidence"]["client_comm"]) for r in sec["runs"]}
    assert comms == {("tcp", "distributed.comm.tcp.TCP"), ("tls", "distributed.comm.tcp.TLS"),
                     ("asyncio", "asynciocomm.comm.AsyncioComm"),
                     ("asyncio+tls", "asynciocomm.comm.AsyncioComm")}
    head = ratios.headline(doc)
    assert ("| df_shuffle: wall time, s | no measurable difference (1 pair) "
            "| no measurable difference (1 pair) |") in head
    assert "`asyncio+tls@asyncio` vs `tls@asyncio`" in head
    report = (tmp_path / "report.md").read_text()
    assert "| df_shuffle | " in report and "workloads_ratios_wall_s.png" in report
    assert (tmp_path / "workloads_ratios_wall_s.png").stat().st_size > 0

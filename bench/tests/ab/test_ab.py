"""``ab`` end to end on a small script that starts its own LocalCluster."""

from __future__ import annotations

from pathlib import Path

from asynciocomm_bench import cli
from asynciocomm_bench.common.results import load

SCRIPT = '''
import sys
from distributed import Client, LocalCluster


def inc(x):
    return x + 1


if __name__ == "__main__":
    n = int(sys.argv[1])
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster, \\
            Client(cluster) as client:
        assert sum(client.gather(client.map(inc, range(n)))) == n * (n + 1) // 2
'''


def test_ab_switches_the_comm_from_outside_and_proves_it(tmp_path: Path) -> None:
    script = tmp_path / "user.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out"
    rc = cli.main(["ab", "--pairs", "1", "--loop", "uvloop", "--quiet", "--no-plots",
                   "--out", str(out), str(script), "50"])
    assert rc == 0
    sec = load(out)["ab"]
    assert sec["errors"] == []
    assert [(r["side"], r["exit"]) for r in sec["runs"]] == [("stock", 0), ("asynciocomm", 0)]
    stock, ours = sec["runs"]
    for run in sec["runs"]:
        assert run["roles"] == ["client", "nanny", "scheduler", "worker"]
        assert run["processes"] == 3  # the script's, and two worker processes
        assert run["sched_loop_cpu_s"] > 0
    assert all(c.startswith("distributed.comm.tcp.") for c in stock["classes"])
    assert all(c.startswith("asynciocomm.") for c in ours["classes"])
    assert [c["label"] for c in sec["configs"]] == ["tcp@uvloop", "asyncio@uvloop"]
    metrics = {(s["config"], s["metric"]) for s in sec["samples"]}
    assert ("asyncio@uvloop", "wall_s") in metrics and ("tcp@uvloop", "sched_loop_cpu_s") in metrics
    assert "every process as expected" in (out / "report.md").read_text()


def test_a_failing_script_is_an_error_not_a_sample(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text("import sys\nsys.exit(3)\n")
    out = tmp_path / "out"
    assert cli.main(["ab", "--pairs", "1", "--quiet", "--no-plots", "--out", str(out),
                     str(script)]) == 0
    sec = load(out)["ab"]
    assert sec["samples"] == []
    assert [e["config"] for e in sec["errors"]] == ["stock", "asynciocomm"]
    assert "exited with 3" in sec["errors"][0]["error"]
    assert "no scheduler witnessed" in sec["errors"][0]["error"]

"""``asynciocomm-bench scale`` end to end: a 2-host, 8-worker namespace cluster
per scheme and loop, a computation that finishes, nothing left behind."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from asynciocomm_bench import cli
from asynciocomm_bench.common.results import load
from asynciocomm_bench.scale import netns

WORKERS = 8


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _our_namespaces() -> list[str]:
    return [n for n in netns.list_namespaces()
            if (m := netns.NAME_RE.match(n)) and int(m.group(1)) == __import__("os").getpid()]


def test_smoke_in_namespaces(namespaces: None, tmp_path: Path) -> None:
    before = _children()
    rc = cli.main(["scale", "--size", "smoke", "--schemes", "tcp,asyncio",
                   "--loops", "asyncio,uvloop", "--workers", str(WORKERS), "--hosts", "2",
                   "--no-multihome", "--quiet", "--no-plots", "--out", str(tmp_path)])
    assert rc == 0
    sec = load(tmp_path)["scale"]
    assert sec["errors"] == []
    assert sec["network"] == "namespaces"
    labels = [c["label"] for c in sec["configs"]]
    assert sorted(labels) == ["asyncio@asyncio", "asyncio@uvloop", "tcp@asyncio",
                              "tcp@uvloop"]
    assert {r["config"] for r in sec["runs"]} == set(labels)
    for run in sec["runs"]:
        assert run["hosts"]["workers"] == {"h0": 4, "h1": 4}
        assert run["hosts"]["scheduler"] != "127.0.0.1"
    assert sec["loop_classes"]["asyncio@uvloop"]["workers"] == ["uvloop.Loop"]
    assert sec["loop_classes"]["tcp@asyncio"]["scheduler"].endswith("EventLoop")
    for lab in labels:
        s = sec["summary"][lab]
        assert s[f"map_w{WORKERS}_sched_cpu_us"]["median"] > 0
        # a task-finished message per task; a worker's batched stream may carry
        # several in one write, so the scheduler's comm reads can be fewer
        reads, msgs = (s[f"map_w{WORKERS}_{k}"]["median"] for k in ("reads", "read_msgs"))
        assert msgs >= 1 and 0 < reads <= msgs
        assert s[f"map_w{WORKERS}_wire_rx_bytes"]["median"] > 0  # counted on eth0
    assert _our_namespaces() == []
    assert _children() <= before
    assert "## Scale: many workers on separate hosts" in (tmp_path / "report.md").read_text()


def test_loopback_fallback_says_so(tmp_path: Path) -> None:
    rc = cli.main(["scale", "--size", "smoke", "--schemes", "asyncio", "--loops", "asyncio",
                   "--workers", "4", "--loopback", "--no-multihome", "--quiet",
                   "--no-plots", "--out", str(tmp_path)])
    assert rc == 0
    sec = load(tmp_path)["scale"]
    assert sec["errors"] == []
    assert sec["network"] == "loopback" and sec["network_note"] == "loopback requested"
    assert sec["runs"][0]["hosts"]["scheduler"] == "127.0.0.1"
    assert "**loopback** (no namespaces: loopback requested)" in \
        (tmp_path / "report.md").read_text()


@pytest.mark.parametrize("argv", [["--workers", "0"], ["--hosts", "0"]])
def test_bad_counts_are_refused(argv: list[str], tmp_path: Path) -> None:
    assert cli.main(["scale", *argv, "--out", str(tmp_path)]) == 2

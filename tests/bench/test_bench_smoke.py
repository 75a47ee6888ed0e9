"""End-to-end smoke runs of ``comm`` and ``cluster`` with tiny bounds."""

from __future__ import annotations

from pathlib import Path

from bench import cli
from bench.results import load


def test_comm_smoke(tmp_path: Path) -> None:
    rc = cli.main(["comm", "--size", "smoke", "--schemes", "tcp", "--loops", "asyncio",
                   "--quiet", "--no-plots", "--out", str(tmp_path)])
    assert rc == 0
    doc = load(tmp_path)
    sec = doc["comm"]
    assert sec["errors"] == []
    labels = [c["label"] for c in sec["configs"]]
    assert labels == ["tcp@asyncio", "rawsock", "rawaio@asyncio", "rawtask@asyncio", "proto"]
    tcp = sec["summary"]["tcp@asyncio"]
    for metric in ("ping_rts", "ping_p99_us", "ping_cpu_us", "stream_msgs",
                   "bulk_64KiB_gibs", "bulk_1MiB_gibs", "clients_2_rts"):
        assert tcp[metric]["median"] > 0, metric
    assert sec["summary"]["proto"]["ping_cpu_us"]["median"] > 0
    for label in ("tcp@asyncio", "rawsock", "rawaio@asyncio", "rawtask@asyncio"):  # faults
        assert sec["summary"][label]["bulk_1MiB_faults"]["median"] >= 0, label
    assert sec["loop_classes"]["tcp@asyncio"]["server"].endswith("EventLoop")
    assert doc["environment"]["load"]["loadavg_end"]
    assert "| metric | tcp@asyncio | rawsock |" in (tmp_path / "report.md").read_text()


def test_cluster_smoke(tmp_path: Path) -> None:
    rc = cli.main(["cluster", "--size", "smoke", "--schemes", "tcp", "--loops", "uvloop",
                   "--gc", "off", "--quiet", "--no-plots", "--out", str(tmp_path)])
    assert rc == 0
    sec = load(tmp_path)["cluster"]
    assert sec["errors"] == []
    assert [c["label"] for c in sec["configs"]] == ["tcp@asyncio", "tcp@uvloop"]
    assert sec["loop_classes"]["tcp@uvloop"]["scheduler"] == "uvloop.Loop"
    for wl in ("wide", "tree", "shuffle"):
        entry = sec["summary"]["tcp@uvloop"][f"{wl}_gc_off_tps"]
        assert entry["median"] > 0 and entry["ratio_ref"] > 0

"""An end-to-end smoke run of ``comm`` with tiny bounds."""

from __future__ import annotations

from pathlib import Path

from bench import cli
from bench.common.results import load


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

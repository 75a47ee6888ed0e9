"""An end-to-end smoke run of ``comm`` with tiny bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynciocomm_bench import cli
from asynciocomm_bench.common.results import load


def test_comm_smoke(tmp_path: Path) -> None:
    rc = cli.main(["comm", "--size", "smoke", "--schemes", "tcp", "--loops", "asyncio",
                   "--quiet", "--no-plots", "--out", str(tmp_path)])
    assert rc == 0
    doc = load(tmp_path)
    sec = doc["comm"]
    assert sec["errors"] == []
    labels = [c["label"] for c in sec["configs"]]
    assert labels == ["tcp@asyncio", "rawsock", "rawaio@asyncio", "rawtask@asyncio",
                      "rawkeep@asyncio", "proto"]
    tcp = sec["summary"]["tcp@asyncio"]
    for metric in ("ping_rts", "ping_p99_us", "ping_cpu_us", "stream_msgs",
                   "bulk_64KiB_gibs", "bulk_1MiB_gibs", "clients_2_rts"):
        assert tcp[metric]["median"] > 0, metric
    assert sec["summary"]["proto"]["ping_cpu_us"]["median"] > 0
    for label in ("tcp@asyncio", "rawsock", "rawaio@asyncio", "rawtask@asyncio",
                  "rawkeep@asyncio"):  # faults
        assert sec["summary"][label]["bulk_1MiB_faults"]["median"] >= 0, label
        # each side's CPU: the receiving server's and the sending client's
        assert sec["summary"][label]["bulk_1MiB_cpu_us"]["median"] > 0, label
        assert sec["summary"][label]["bulk_1MiB_send_cpu_us"]["median"] > 0, label
    assert sec["loop_classes"]["tcp@asyncio"]["server"].endswith("EventLoop")
    assert doc["environment"]["load"]["loadavg_end"]
    assert "| metric | tcp@asyncio | rawsock |" in (tmp_path / "report.md").read_text()


def test_cpu_thread_and_per_thread_cpu(tmp_path: Path) -> None:
    """``--cpu-thread`` runs a busy thread in the server, which then spends CPU
    beyond its event loop's; the loop thread's CPU per round trip is its own
    row."""
    rc = cli.main(["comm", "--size", "smoke", "--schemes", "tcp", "--loops", "asyncio",
                   "--no-refs", "--cpu-thread", "--quiet", "--no-plots",
                   "--out", str(tmp_path)])
    assert rc == 0
    sec = load(tmp_path)["comm"]
    assert sec["errors"] == [] and sec["cpu_thread"] is True
    tcp = sec["summary"]["tcp@asyncio"]
    assert 0 < tcp["ping_loop_cpu_us"]["median"] < tcp["ping_cpu_us"]["median"]
    assert 0 < tcp["bulk_64KiB_loop_cpu_us"]["median"] < tcp["bulk_64KiB_cpu_us"]["median"]



def test_only_the_bulk_sizes_asked_for(tmp_path: Path) -> None:
    """``--only bulk --bulk SIZES``: the one-way test alone, at those sizes, with
    each comm's share of the bare protocol on its loop in the report."""
    rc = cli.main(["comm", "--size", "smoke", "--schemes", "tcp", "--loops", "asyncio",
                   "--only", "bulk", "--bulk", "64KiB,2MiB", "--reps", "1", "--quiet",
                   "--no-plots", "--out", str(tmp_path)])
    assert rc == 0
    sec = load(tmp_path)["comm"]
    assert sec["errors"] == []
    measured = {s["metric"] for s in sec["samples"] if s["config"] == "tcp@asyncio"}
    assert {"bulk_64KiB_gibs", "bulk_2MiB_gibs", "bulk_2MiB_send_cpu_us"} <= measured
    assert not {m for m in measured if m.startswith(("ping", "stream", "clients"))}
    assert "bulk_1MiB_gibs" not in measured
    proto = {s["metric"] for s in sec["samples"] if s["config"] == "proto"}
    assert proto == {"bulk_64KiB_cpu_us"}
    report = (tmp_path / "report.md").read_text()
    assert "| `tcp@asyncio` vs `rawaio@asyncio` |" in report
    assert "| `tcp@asyncio` vs `rawkeep@asyncio` |" in report
    assert report.index("vs `rawkeep@asyncio`") < report.index("vs `rawaio@asyncio`")


def test_placement_split_and_the_colocation_share(tmp_path: Path) -> None:
    """``--placement split`` pins the client and each server apart, so no window
    ever finds them on one CPU; the default leaves placement to the kernel and
    reports each window's share, between 0 and 1."""
    from asynciocomm_bench.common.placement import can_split

    if not can_split():
        pytest.skip("needs two CPUs")
    shares: dict[str, list[float]] = {}
    for where in ("split", "free"):
        out = tmp_path / where
        rc = cli.main(["comm", "--size", "smoke", "--schemes", "tcp", "--loops", "asyncio",
                       "--only", "bulk", "--bulk", "1MiB", "--reps", "1", "--quiet",
                       "--no-plots", "--placement", where, "--out", str(out)])
        assert rc == 0
        sec = load(out)["comm"]
        assert sec["errors"] == [] and sec["placement"] == where
        shares[where] = [s["value"] for s in sec["samples"]
                         if s["metric"] == "bulk_1MiB_colocated"]
    # every configuration but proto (no server) has the row
    assert len(shares["split"]) == len(shares["free"]) == 5
    assert shares["split"] == [0.0] * 5
    assert all(0.0 <= v <= 1.0 for v in shares["free"])
    assert "Placement `split`" in (tmp_path / "split" / "report.md").read_text()

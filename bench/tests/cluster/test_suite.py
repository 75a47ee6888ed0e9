"""An end-to-end smoke run of ``cluster`` with tiny bounds."""

from __future__ import annotations

from pathlib import Path

from asynciocomm_bench import cli
from asynciocomm_bench.common.results import load


def test_cluster_smoke(tmp_path: Path) -> None:
    rc = cli.main(["cluster", "--size", "smoke", "--schemes", "tcp", "--loops", "uvloop",
                   "--gc", "off", "--quiet", "--no-plots", "--out", str(tmp_path)])
    assert rc == 0
    sec = load(tmp_path)["cluster"]
    assert sec["errors"] == []
    assert [c["label"] for c in sec["configs"]] == ["tcp@uvloop"]
    assert sec["loop_classes"]["tcp@uvloop"]["scheduler"] == "uvloop.Loop"
    for wl in ("wide", "tree", "shuffle"):
        entry = sec["summary"]["tcp@uvloop"][f"{wl}_gc_off_tps"]
        assert entry["median"] > 0 and entry["ratio_ref"] > 0

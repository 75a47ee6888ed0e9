"""PNG plots of a result document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asynciocomm_bench.report import plots


def test_plots_are_pngs(tiny_doc: dict[str, Any], tmp_path: Path) -> None:
    written = plots.render_all(tiny_doc, tmp_path)
    assert written["comm"] == ["comm_ping_rts.png"]
    assert written["cluster"] == ["cluster_wide_gc_on_wall_s.png"]
    assert written["profile"] == ["profile_shares.png"]
    for name in written["comm"] + written["cluster"] + written["profile"]:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000

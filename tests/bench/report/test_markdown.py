"""The markdown report of a result document, and the ``report`` subcommand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report import markdown


def test_fmt() -> None:
    assert markdown.fmt(12345.6) == "12,346"
    assert markdown.fmt(123.4) == "123"
    assert markdown.fmt(12.34) == "12.3"
    assert markdown.fmt(1.234) == "1.23"
    assert markdown.fmt(None) == "–"


def test_render_markdown(tiny_doc: dict[str, Any]) -> None:
    md = markdown.render(tiny_doc, {"comm": ["comm_m.png"]})
    assert md.startswith("# asynciocomm-bench results")
    assert "| metric | tcp@asyncio | asyncio@uvloop |" in md
    # medians 150 and 350, paired ratios 3.0 and 2.0 -> median 2.5
    assert "| a metric, op/s | 150 | 350 (2.50×) |" in md
    # cluster: lower is better, 10 -> 5 is a 2x speed-up
    assert "| 10.0 | 5.00 (2.00×) |" in md
    assert "asynciocomm-bench comm --size smoke" in md
    assert "![comm_m.png](comm_m.png)" in md
    assert "| transitions | 50.0 % |" in md
    assert "1.10× wall" in md


def test_report_subcommand_rerenders(tiny_doc: dict[str, Any], tmp_path: Path) -> None:
    from bench import cli
    from bench.common.results import save

    save(tiny_doc, tmp_path / "run")
    out = tmp_path / "rendered"
    rc = cli.main(["report", str(tmp_path / "run" / "results.json"), "--out", str(out),
                   "--name", "README.md"])
    assert rc == 0
    md = (out / "README.md").read_text()
    assert "| a metric, op/s | 150 | 350 (2.50×) |" in md
    assert (out / "comm_m.png").exists()

"""The markdown report of a result document, and the ``report`` subcommand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asynciocomm_bench.report import markdown


def test_fmt() -> None:
    assert markdown.fmt(12345.6) == "12,346"
    assert markdown.fmt(123.4) == "123"
    assert markdown.fmt(12.34) == "12.3"
    assert markdown.fmt(1.234) == "1.23"
    assert markdown.fmt(None) == "–"


def test_render_markdown(tiny_doc: dict[str, Any]) -> None:
    md = markdown.render(tiny_doc, {"comm": ["comm_m.png"]})
    assert md.startswith("# asynciocomm-bench results")
    # medians only in the first table: 100 and 300
    assert "| metric | tcp@uvloop | asyncio@uvloop |" in md
    assert "| a metric, op/s | 100 | 300 |" in md
    # paired ratios 3.0, 2.0 and 2.5 against tcp on the same loop
    assert "| a metric, op/s | 2.50× (2.00–3.00×, 3 pairs) |" in md
    # cluster: 2x less wall time, but over 2 pairs only
    assert "| wide wall, op/s | 10.0 | 5.00 |" in md
    assert "| wide wall, op/s | no measurable difference (2 pairs) |" in md
    assert "asynciocomm-bench comm --size smoke" in md
    assert "![comm_m.png](comm_m.png)" in md
    assert "| transitions | 50.0 % |" in md
    assert "1.10× wall" in md


def test_the_headline_sets_each_comm_against_stock_on_its_loop(
        tiny_doc: dict[str, Any]) -> None:
    head = markdown.render(tiny_doc).split("## Headline")[1].split("\n## ")[0]
    assert ("| measurement | `asyncio@uvloop` vs `tcp@uvloop` | "
            "`asyncio@asyncio` vs `tcp@asyncio` |") in head
    assert "| a metric, op/s | 2.50× (2.00–3.00×, 3 pairs) | – |" in head
    assert "| wide wall, op/s | – | no measurable difference (2 pairs) |" in head


def test_report_subcommand_rerenders(tiny_doc: dict[str, Any], tmp_path: Path) -> None:
    from asynciocomm_bench import cli
    from asynciocomm_bench.common.results import save

    save(tiny_doc, tmp_path / "run")
    out = tmp_path / "rendered"
    rc = cli.main(["report", str(tmp_path / "run" / "results.json"), "--out", str(out),
                   "--name", "README.md"])
    assert rc == 0
    md = (out / "README.md").read_text()
    assert "| a metric, op/s | 2.50× (2.00–3.00×, 3 pairs) |" in md
    assert (out / "comm_ping_rts.png").exists()


def test_report_takes_only_the_sections_named_for_a_run(tiny_doc: dict[str, Any],
                                                         tmp_path: Path) -> None:
    """PATH:SECTION,... merges only those sections of that run: a newer comm run
    replaces an older run's comm section instead of being merged with it."""
    import copy

    from asynciocomm_bench import cli
    from asynciocomm_bench.common.results import load, save

    save(tiny_doc, tmp_path / "old")
    newer = copy.deepcopy(tiny_doc)
    del newer["cluster"], newer["profile"]
    for s in newer["comm"]["samples"]:
        s["value"] *= 10
    save(newer, tmp_path / "new")
    out = tmp_path / "merged"
    rc = cli.main(["report", f"{tmp_path / 'old'}:cluster,profile", str(tmp_path / "new"),
                   "--out", str(out), "--no-plots"])
    assert rc == 0
    doc = load(out)
    assert doc["comm"]["samples"] == newer["comm"]["samples"]  # the newer run's only
    assert doc["cluster"] == tiny_doc["cluster"] and doc["profile"] == tiny_doc["profile"]
    assert [r["created"] for r in doc["merged_from"]] == [tiny_doc["created"]] * 2

"""``asynciocomm-bench gc``: its place in the command line, its report, and one
real run of a small cluster with and without the draft."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from asynciocomm_bench.gc import report, suite


def _section(values: dict[str, list[float]], metric: str = "cyclic_objects") -> dict:
    configs = [(lab.split("@")[0], lab.split("@")[1].split("+")[0], "+" in lab.split("@")[1])
               for lab in values]
    samples = [{"rep": r, "config": lab, "metric": metric, "value": v}
               for lab, vals in values.items() for r, v in enumerate(vals)]
    return suite.section(configs, list(values), samples, {}, [], 3, False, 1.0,
                         {"bounds": {"workers": 4, "threads": 1, "tasks": 1000}})


def test_gc_is_a_subcommand() -> None:
    from asynciocomm_bench.cli import build_parser, commands

    assert "gc" in commands()
    args = build_parser().parse_args(["gc", "--size", "smoke", "--draft", "on", "--tasks", "50"])
    assert (args.cmd, args.draft, args.tasks) == ("gc", "on", 50)


def test_report_compares_the_draft_and_the_stock_comm() -> None:
    sec = _section({"tcp@asyncio": [20_000, 21_000, 22_000],
                    "asyncio@asyncio": [20_500, 21_000, 21_500],
                    "tcp@asyncio+0011": [0, 0, 0],
                    "asyncio@asyncio+0011": [0, 0, 10]})
    assert sec["draft_refs"] == {"tcp@asyncio+0011": "tcp@asyncio",
                                 "asyncio@asyncio+0011": "asyncio@asyncio"}
    assert sec["same_loop_refs"]["asyncio@asyncio+0011"] == "tcp@asyncio+0011"
    md = report.render(sec)
    assert "| cyclic objects, with the draft / without | 0.0 % (0.0–0.0 %, 3 pairs) |" in md
    # asynciocomm against stock: the range reaches 1.0
    assert "no measurable difference: 1.00× (0.98–1.02×, 3 pairs)" in md


def test_fewer_than_three_pairs_is_no_measurable_difference() -> None:
    assert report.fraction_cell([0.5, 0.4]).startswith("no measurable difference")
    assert report.fraction_cell([0.5, 0.4, 0.45]) == "0.45× (0.40–0.50×, 3 pairs)"
    # a range that prints as reaching 1.00 is no difference either
    assert report.fraction_cell([1.001, 1.002, 1.004]).startswith("no measurable difference")


@pytest.mark.slow
def test_a_small_cluster_with_and_without_the_draft(tmp_path: Path) -> None:
    """With the draft, the scheduler makes no cyclic garbage; without it, what it
    makes is BatchedSend's TimeoutError cycles, about one timeout per batch."""
    import distributed

    from asynciocomm_bench.common import sdist

    path, how = sdist.fetch(distributed.__version__)
    if path is None and how.startswith(sdist.UNREACHABLE):
        pytest.skip(how)
    bounds = dataclasses.replace(suite.PRESETS["smoke"], tasks=300, warmup=50)
    sec = suite.run_gc(["asyncio"], ["asyncio"], bounds, drafts=[False, True], quiet=True)
    assert not sec["errors"], sec["errors"]
    s = sec["summary"]
    before, after = s["asyncio@asyncio"], s["asyncio@asyncio+0011"]
    assert before["cyclic_objects"]["median"] > 0
    assert before["batched_share"]["median"] > 90
    assert before["timeouts_per_batch"]["median"] > 0.9
    assert after["cyclic_objects"]["median"] == 0
    assert after["batches"]["median"] > 0
    kinds = sec["details"]["asyncio@asyncio"][0]["kinds"]
    assert kinds[0]["creator"].startswith(
        "TimeoutError: distributed.batched.BatchedSend._background_send"), kinds[0]

"""Same-loop ratios with their spread: the peers, the cells, and the saved record."""

from __future__ import annotations

import re
from pathlib import Path

from asynciocomm_bench.common.results import load
from asynciocomm_bench.common.stats import Comparison, cell
from asynciocomm_bench.report import ratios

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results" / "results.json"


def test_cells() -> None:
    assert cell(Comparison((2.0, 2.5, 3.0))) == "2.50× (2.00–3.00×, 3 pairs)"
    assert cell(Comparison((0.5, 0.6, 0.7))) == "0.60× (0.50–0.70×, 3 pairs)"
    assert cell(Comparison((0.9, 1.5, 2.0))) == "no measurable difference (3 pairs)"
    assert cell(Comparison((3.0,))) == "no measurable difference (1 pair)"
    assert cell(Comparison(())) == cell(None) == "–"


def test_each_configuration_is_set_against_stock_on_its_own_loop() -> None:
    configs = [{"label": "tcp@asyncio", "kind": "comm", "scheme": "tcp", "loop": "asyncio"},
               {"label": "tcp@uvloop", "kind": "comm", "scheme": "tcp", "loop": "uvloop"},
               {"label": "tls@uvloop", "kind": "comm", "scheme": "tls", "loop": "uvloop",
                "tls": True},
               {"label": "asyncio@uvloop", "kind": "comm", "scheme": "asyncio",
                "loop": "uvloop"},
               {"label": "asyncio+tls@uvloop", "kind": "comm", "scheme": "asyncio+tls",
                "loop": "uvloop", "tls": True},
               {"label": "rawsock", "kind": "rawsock", "scheme": None, "loop": None},
               {"label": "rawtask@uvloop", "kind": "rawtask", "scheme": None,
                "loop": "uvloop"},
               {"label": "proto", "kind": "proto", "scheme": None, "loop": None}]
    # the stock comms and proto have none; a saved document's own map sets TLS
    # against tcp, but the peers come from the configurations
    sec = {"configs": configs, "same_loop_refs": {"asyncio+tls@uvloop": "tcp@uvloop"}}
    assert ratios.peers(sec) == {"asyncio@uvloop": "tcp@uvloop",
                                 "asyncio+tls@uvloop": "tls@uvloop",
                                 "rawsock": "tcp@asyncio", "rawtask@uvloop": "tcp@uvloop"}


def test_the_saved_record_renders_in_the_same_form() -> None:
    """bench/results/results.json, saved by an earlier version of the bench, renders
    a headline of same-loop ratios with their spread, TLS against TLS."""
    head = ratios.headline(load(RESULTS))
    rows = [line for line in head.splitlines() if line.startswith("| ")]
    assert "`asyncio+tls@uvloop` vs `tls@uvloop`" in rows[0]
    assert "`asyncio@uvloop` vs `tcp@uvloop`" in rows[0]
    cell = re.compile(r"^(\d+\.\d\d× \(\d+\.\d\d–\d+\.\d\d×, \d+ pairs\)"
                      r"|no measurable difference \(\d+ pairs?\)|–)$")
    for row in rows[1:]:
        for c in row.strip("|").split("|")[1:]:
            assert cell.match(c.strip()), (row, c)


def test_the_readmes_carry_the_records_headline() -> None:
    """The README's headline and bench/results/README.md show the headline table
    that the saved record renders, cell for cell: same loop, ranges, noise as noise."""
    root = RESULTS.parents[2]
    want = [line for line in ratios.headline(load(RESULTS)).splitlines()
            if line.startswith("|")]
    readme = (root / "README.md").read_text()
    section = readme.split("<!-- bench-headline -->", 1)[1].split("<!-- /bench-headline -->")[0]
    record = (root / "bench" / "results" / "README.md").read_text()
    for text in (section, record):
        lines = text.splitlines()
        start = lines.index(want[0])
        assert lines[start:start + len(want)] == want


def test_bulk_is_set_against_the_bare_protocol_on_the_same_loop_and_transport() -> None:
    """Each comm, stock included, against ``rawaio@loop`` (TLS: ``rawaio+tls@loop``)
    on every bulk size: the share of the raw socket, paired per repetition."""
    configs = [{"label": "tcp@uvloop", "kind": "comm", "scheme": "tcp", "loop": "uvloop"},
               {"label": "asyncio@uvloop", "kind": "comm", "scheme": "asyncio",
                "loop": "uvloop"},
               {"label": "asyncio+tls@uvloop", "kind": "comm", "scheme": "asyncio+tls",
                "loop": "uvloop", "tls": True},
               {"label": "asyncio@asyncio", "kind": "comm", "scheme": "asyncio",
                "loop": "asyncio"},  # no bare protocol on its loop in this run
               {"label": "rawaio@uvloop", "kind": "rawaio", "scheme": None, "loop": "uvloop"},
               {"label": "rawaio+tls@uvloop", "kind": "rawaio", "scheme": None,
                "loop": "uvloop", "tls": True}]
    values = {"tcp@uvloop": (3.0, 3.2, 3.0), "asyncio@uvloop": (3.6, 3.6, 3.8),
              "asyncio+tls@uvloop": (1.0, 1.1, 1.2), "asyncio@asyncio": (3.0, 3.0, 3.0),
              "rawaio@uvloop": (4.0, 4.0, 4.0), "rawaio+tls@uvloop": (1.25, 1.25, 1.25)}
    samples = [{"rep": rep, "config": lab, "metric": "bulk_16MiB_gibs", "value": v}
               for lab, vs in values.items() for rep, v in enumerate(vs)]
    sec = {"configs": configs, "samples": samples,
           "metrics": {"bulk_16MiB_gibs": {"title": "bulk 16MiB one-way", "unit": "GiB/s"},
                       "bulk_16MiB_cpu_us": {"title": "CPU", "unit": "µs"}}}
    assert ratios.raw_peer(configs[2]) == "rawaio+tls@uvloop"
    assert ratios.raw_peer(configs[4]) is None
    rows = ratios.raw_share_table(sec).splitlines()
    assert rows[0] == ("| metric | `tcp@uvloop` vs `rawaio@uvloop` | `asyncio@uvloop` vs "
                       "`rawaio@uvloop` | `asyncio+tls@uvloop` vs `rawaio+tls@uvloop` |")
    assert rows[2] == ("| bulk 16MiB one-way, GiB/s | 0.75× (0.75–0.80×, 3 pairs) | "
                       "0.90× (0.90–0.95×, 3 pairs) | 0.88× (0.80–0.96×, 3 pairs) |")
    assert len(rows) == 3  # the CPU row is not a throughput

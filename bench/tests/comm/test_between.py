"""``asynciocomm-bench between``: two installs, one measurement, ABBA pairs, real
processes (here both installs are this interpreter)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from asynciocomm_bench import cli
from asynciocomm_bench.comm import between
from asynciocomm_bench.common.options import BenchError
from asynciocomm_bench.common.tlsfiles import make_tls_files

MiB = 1024 * 1024


def test_tests_parse_and_bad_ones_are_refused() -> None:
    assert between.parse_test("ping") == ("ping", 0)
    assert between.parse_test("stream") == ("stream", 0)
    assert between.parse_test("bulk:16MiB") == ("bulk", 16 * MiB)
    assert between.parse_test("clients:32") == ("clients", 32)
    for bad in ("bulk", "bulk:1KiB", "ping:1MiB", "pong", "bulk:lots", "clients", "clients:0",
                "clients:many"):
        with pytest.raises((BenchError, ValueError)):
            between.parse_test(bad)


def test_pairs_alternate_their_order_and_every_ratio_is_paired() -> None:
    spec = {"test": "ping", "size": 0, "loop": "asyncio", "scheme": "asyncio",
            "seconds": 0.3}
    lines: list[str] = []
    got = between.compare(sys.executable, sys.executable, spec, pairs=3, timeout=120,
                          log=lines.append)
    assert [r["order"] for r in got.pairs] == ["ab", "ba", "ab"]
    assert [r["pair"] for r in got.pairs] == [0, 1, 2]
    for r in got.pairs:
        for side in "ab":
            assert r[side]["value"] > 0 and r[side]["n"] > 0
            assert r[side]["server_cpu_us"] > 0 and r[side]["client_cpu_us"] > 0
    assert got.value.ratios == tuple(r["b"]["value"] / r["a"]["value"] for r in got.pairs)
    assert got.server_cpu.ratios == tuple(
        r["a"]["server_cpu_us"] / r["b"]["server_cpu_us"] for r in got.pairs)
    assert got.client_cpu.ratios == tuple(
        r["a"]["client_cpu_us"] / r["b"]["client_cpu_us"] for r in got.pairs)
    assert "(B then A)" in lines[1] and "(A then B)" in lines[0]


@pytest.mark.parametrize("test, scheme, loop", [
    ("stream", "asyncio", "uvloop"),
    ("bulk:8MiB", "asyncio+tls", "asyncio"),
    ("bulk:8MiB", "tcp", "uvloop"),
    ("clients:8", "asyncio", "asyncio"),
    ("clients:4", "tls", "uvloop"),
])  # fmt: skip
def test_the_probe_counts_every_message_it_times(tmp_path: Path, test: str, scheme: str,
                                                 loop: str) -> None:
    """The probe's server counts what the client sent (the probe raises if not),
    over TLS too, and a bulk figure is in GiB/s of the messages timed."""
    name, size = between.parse_test(test)
    spec = {"test": name, "size": size, "loop": loop, "scheme": scheme, "seconds": 0.3}
    if scheme.endswith("tls"):
        spec["tls"] = dataclasses.asdict(make_tls_files(tmp_path))
    got = between.probe(sys.executable, spec, timeout=120)
    assert got["n"] >= 1 and got["value"] > 0 and got["server_cpu_us"] > 0
    if name == "bulk":
        assert got["value"] < 1000  # GiB/s, not bytes/s


def test_the_subcommand_writes_its_table(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["between", sys.executable, sys.executable, "--test", "bulk:4MiB",
                   "--pairs", "1", "--seconds", "0.2", "--quiet", "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "between.json").read_text())
    assert doc["spec"]["size"] == 4 * MiB and len(doc["pairs"]) == 1
    out = capsys.readouterr().out
    assert "| GiB/s | no measurable difference (1 pair) |" in out


def test_a_broken_install_is_a_one_line_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-python")
    assert cli.main(["between", sys.executable, missing, "--pairs", "1",
                     "--seconds", "0.2", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no-python" in err and len(err.strip().splitlines()) == 1

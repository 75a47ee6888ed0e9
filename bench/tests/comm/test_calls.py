"""``asynciocomm-bench calls``: Python calls per round trip, counted for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asynciocomm_bench import cli
from asynciocomm_bench.comm.calls import count_bulk, count_calls


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_asyncio_comm_makes_a_fraction_of_tcps_python_calls(loop: str) -> None:
    ours = count_calls("asyncio", loop, n=200)
    stock = count_calls("tcp", loop, n=200)
    # tcp's count moves with the timing of its reads (110-190 on the asyncio loop,
    # measured on this machine); ours stays at 40 (asyncio loop) and 16 (uvloop).
    assert 0 < ours["py"] < stock["py"] / 2, (ours, stock)
    assert ours["c"] > 0 and stock["c"] > 0


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_large_array_message_is_counted_on_each_side(loop: str) -> None:
    """16 MiB one-way: the stock comm (de)serializes it in distributed's offload
    thread (about 160 calls there per message), ours on the loops.

    Only where the calls happen is asserted. How many the receiving loop makes
    follows how many reads the kernel's timing splits the message into (ours
    540-780 against stock's 450-600 on this machine, either ahead), so that
    comparison is the bench's table, not a test."""
    size = 16 * 2**20
    ours = count_bulk("asyncio", loop, size, n=3)
    stock = count_bulk("tcp", loop, size, n=3)
    assert ours["offload"]["py"] < 10 < 50 < stock["offload"]["py"], (ours, stock)
    assert ours["recv"]["py"] > 0 and stock["recv"]["py"] > 0, (ours, stock)
    assert ours["send"]["py"] > 0 and stock["send"]["py"] > 0


def test_tls_schemes_are_counted_over_tls() -> None:
    ours = count_calls("asyncio+tls", "asyncio", n=100)
    stock = count_calls("tls", "asyncio", n=100)
    assert 0 < ours["py"] < stock["py"]


def test_the_subcommand_writes_its_table(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["calls", "--schemes", "asyncio", "--loops", "asyncio", "-n", "50",
                   "--out", str(tmp_path)])
    assert rc == 0
    rows = json.loads((tmp_path / "calls.json").read_text())["rows"]
    assert [(r["scheme"], r["loop"]) for r in rows] == [("asyncio", "asyncio")]
    assert "| asyncio@asyncio |" in capsys.readouterr().out


def test_the_bulk_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["calls", "--bulk", "12MiB", "--schemes", "asyncio", "--loops", "uvloop",
                   "-n", "2", "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "calls.json").read_text())
    assert doc["bulk"] == 12 * 2**20 and doc["n"] == 2
    assert {"send_py", "recv_py", "offload_py"} <= set(doc["rows"][0])
    assert "| asyncio@uvloop |" in capsys.readouterr().out


def test_an_unknown_scheme_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["calls", "--schemes", "bogus"]) == 2
    assert "scheme 'bogus' is not available" in capsys.readouterr().err

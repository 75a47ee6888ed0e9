"""``python -m tests.differential`` and the harness's pieces that need no pair."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.differential import command, compare
from tests.differential.ops import (
    ABORT_SAFE_BYTES,
    Abort,
    CancelRead,
    Close,
    DoubleRead,
    Model,
    Read,
    Sequence,
    Write,
)
from tests.differential.runner import normalize


def test_the_subcommand_runs_stock_against_itself(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc = command.main(["--schemes", "tcp", "--loops", "asyncio",
                   "--examples", "4", "--out", str(tmp_path)])
    assert rc == 0
    text = (tmp_path / "differential.md").read_text()
    assert "| asyncio | tcp vs tcp | 4 |" in text and "no difference" in text
    assert "DIVERGES" not in capsys.readouterr().out


def test_a_divergence_is_shrunk_and_printed_as_a_sequence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A comparison that objects to any close(): the subcommand must find a
    # sequence with one, shrink it to that one step, and print it to replay.
    real = compare.differences

    def strict(stock, ours):  # type: ignore[no-untyped-def]
        closes = [op for op, _, _ in ours.steps if op.endswith(".close()")]
        return real(stock, ours) + [f"{op}: objected" for op in closes]

    monkeypatch.setattr(compare, "differences", strict)
    rc = command.main(["--schemes", "tcp", "--loops", "asyncio",
                   "--examples", "60", "--out", str(tmp_path)])
    assert rc == 0
    text = (tmp_path / "differential.md").read_text()
    assert "DIVERGES" in text
    replay = text.split("Sequence(setup=")[1].split("\n))")[0]
    assert replay.count("Close(side=") == 1 and replay.count("(side=") == 1, replay


def test_an_unknown_variant_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["--schemes", "bogus"]) == 2
    assert "unknown variant 'bogus'" in capsys.readouterr().err


def test_the_model_offers_only_what_stock_does_without_timing() -> None:
    model = Model()
    assert not model.allowed(Read("B"))  # nothing coming: a read would hang
    model.apply(Write("A", "bytes", ABORT_SAFE_BYTES + 1))
    assert model.allowed(Read("B"))
    assert not model.allowed(Abort("A"))  # how much arrives depends on timing
    assert model.allowed(Close("A"))  # a FIN after everything: nothing lost
    model.apply(Write("B", "dict"))
    assert not model.allowed(Close("A"))  # unread bytes: the kernel resets
    model.apply(Close("B"))
    assert model.closed_is_free("A") is False  # A has a message unread: strict
    model.apply(Read("A"))
    assert model.closed_is_free("A")  # all read, the FIN maybe seen: stock varies
    assert not model.allowed(Write("A", "dict"))  # to an ended peer: RST timing


def test_values_are_normalized_by_content() -> None:
    a = np.arange(10, dtype="u1")
    assert normalize({"x": a}) == normalize({"x": a.copy()})
    assert normalize(a) != normalize(a[::-1].copy())
    assert normalize(a) != normalize(a.astype("i8"))
    assert normalize((1, b"ab")) == normalize((1, bytes(b"ab")))
    assert repr(eval(repr(Sequence("stop", (Write("A", "array", 5), Read("B")))))) == repr(
        Sequence("stop", (Write("A", "array", 5), Read("B"))))


def test_reads_that_abort_follow_the_abort_rule() -> None:
    # Found by stock against itself (uvloop, TLS): a double read aborts, and
    # with 4 MiB unread by the peer what reached it depended on timing.
    model = Model()
    assert model.allowed(DoubleRead("A")) and model.allowed(CancelRead("A"))
    model.apply(Write("A", "array", 4 << 20))
    assert not model.allowed(DoubleRead("A")) and not model.allowed(CancelRead("A"))


def test_only_a_safer_closed_is_excused() -> None:
    safer = {s.name: s.applies for s in compare.SAFER}["closed-while-unread"]
    where = "step 3 A.close() closed"
    assert safer(where, "AT BT*", "AT BF*")  # ours keeps serving what is unread
    assert not safer(where, "AT BF*", "AT BT*")  # closed() True with a message unread: the bug
    assert not safer(where, "AT BT", "AT BF")  # nothing unread: not excused
    assert not safer("step 3 B.read()", "AT BT*", "AT BF*")

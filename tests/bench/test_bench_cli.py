"""Command-line parsing and the one-line errors for bad schemes and loops."""

from __future__ import annotations

import pytest

from bench import cli
from bench.options import BenchError, check_loops, check_schemes, is_tls


def test_unknown_scheme_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["comm", "--schemes", "tcp,bogus", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1
    assert "scheme 'bogus' is not available" in err
    assert "Traceback" not in err


def test_unknown_loop_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["cluster", "--loops", "tokio", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "loop 'tokio' is unknown" in err


def test_check_schemes() -> None:
    assert check_schemes(["tcp", "tls", "tcp"]) == ["tcp", "tls"]
    with pytest.raises(BenchError):
        check_schemes([])
    with pytest.raises(BenchError, match="registered now: .*tcp"):
        check_schemes(["nope"])


def test_check_loops() -> None:
    assert check_loops(["uvloop", "asyncio"]) == ["uvloop", "asyncio"]
    with pytest.raises(BenchError):
        check_loops(["trio"])


def test_is_tls() -> None:
    assert is_tls("tls") and is_tls("asyncio+tls") and is_tls("wss")
    assert not is_tls("tcp") and not is_tls("asyncio")


def test_default_subcommand_is_quick() -> None:
    args = cli.build_parser().parse_args(["quick"])
    assert args.size == "quick"
    for name in ("comm", "cluster", "profile", "quick", "all"):
        a = cli.build_parser().parse_args([name, "--schemes", "tcp,tls", "--loops", "uvloop"])
        assert a.schemes == ["tcp", "tls"] and a.loops == ["uvloop"]

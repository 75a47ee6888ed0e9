"""Validation of schemes and loops."""

from __future__ import annotations

import pytest

from bench.common.options import BenchError, check_loops, check_schemes, is_tls


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

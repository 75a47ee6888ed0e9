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


def test_a_label_with_settings_of_its_own() -> None:
    from bench.common.options import base_scheme, nested_config, scheme_config, stock_scheme

    assert check_schemes(["asyncio+tls-thread"]) == ["asyncio+tls-thread"]
    assert base_scheme("asyncio+tls-thread") == "asyncio+tls" and base_scheme("tcp") == "tcp"
    assert is_tls("asyncio+tls-thread") and stock_scheme("asyncio+tls-thread") == "tls"
    assert scheme_config("tcp") == {}
    dotted = scheme_config("asyncio+tls-thread")
    assert dotted == {"distributed.comm.asyncio.tls-thread": True}
    assert nested_config(dotted) == {"distributed": {"comm": {"asyncio": {"tls-thread": True}}}}

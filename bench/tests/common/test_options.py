"""Validation of schemes and loops."""

from __future__ import annotations

import pytest

from asynciocomm_bench.common.options import (
    COMM_BOUNDS,
    FULL_BULK,
    BenchError,
    bulk_bounds,
    check_loops,
    check_schemes,
    is_tls,
)


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


def test_the_full_bulk_test_has_the_sizes_of_real_traffic() -> None:
    """64 KiB to 128 MiB, with the 4-64 MiB of shuffle shards, rechunk pieces and
    gather_dep chunks, each bounded by a count and a time."""
    MiB = 1024 * 1024
    assert sorted(COMM_BOUNDS["full"].bulk) == list(FULL_BULK)
    assert {4 * MiB, 16 * MiB, 32 * MiB, 64 * MiB} <= set(FULL_BULK)
    assert min(FULL_BULK) == 64 * 1024 and max(FULL_BULK) == 128 * MiB
    assert bulk_bounds(64 * 1024) == (20_000, 0.5)
    assert bulk_bounds(16 * MiB) == (128, 0.5)
    assert bulk_bounds(128 * MiB) == (16, 1.0)
    assert bulk_bounds(1024 * MiB) == (8, 1.0)

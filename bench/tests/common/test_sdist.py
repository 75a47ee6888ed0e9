"""Where a distributed sdist comes from: the environment, the cache, else PyPI."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynciocomm_bench.common import sdist


def test_the_environment_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given = tmp_path / "d.tar.gz"
    given.write_bytes(b"x")
    monkeypatch.setenv("ASYNCIOCOMM_DISTRIBUTED_SDIST", str(given))
    monkeypatch.setenv("ASYNCIOCOMM_CACHE_DIR", str(tmp_path / "cache"))
    assert sdist.fetch("1.2.3") == (given, "from $ASYNCIOCOMM_DISTRIBUTED_SDIST")


def test_a_missing_environment_path_is_said(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCIOCOMM_DISTRIBUTED_SDIST", str(tmp_path / "nope.tar.gz"))
    path, why = sdist.fetch("1.2.3")
    assert path is None and "does not exist" in why


def test_the_cache_before_pypi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCIOCOMM_DISTRIBUTED_SDIST", raising=False)
    monkeypatch.setenv("ASYNCIOCOMM_CACHE_DIR", str(tmp_path))
    cached = tmp_path / "distributed-1.2.3.tar.gz"
    cached.write_bytes(b"x")
    monkeypatch.setattr(sdist, "pypi_reachable", lambda: pytest.fail("asked PyPI"))
    assert sdist.fetch("1.2.3") == (cached, "cached")


def test_no_pypi_and_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCIOCOMM_DISTRIBUTED_SDIST", raising=False)
    monkeypatch.setenv("ASYNCIOCOMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(sdist, "pypi_reachable", lambda: False)
    path, why = sdist.fetch("1.2.3")
    assert path is None and why.startswith("PyPI cannot be reached")

"""The bench's wheel: ``asynciocomm_bench`` alone, every subpackage of it, and the
command ``asynciocomm-bench``. Built from a copy of bench/ (the build leaves
nothing in the checkout) and read as a zip file."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1]
PACKAGE = BENCH / "asynciocomm_bench"


def _setuptools_major() -> int:
    try:
        return int(importlib.metadata.version("setuptools").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return 0


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src") / "bench"
    out = tmp_path_factory.mktemp("wheel")
    src.mkdir()
    shutil.copy2(BENCH / "pyproject.toml", src)
    shutil.copy2(BENCH / "README.md", src)
    shutil.copytree(PACKAGE, src / PACKAGE.name,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    cmd = [sys.executable, "-m", "pip", "wheel", str(src), "-w", str(out), "--no-deps", "-q"]
    if _setuptools_major() >= 77:  # what pyproject.toml asks for is here: no download
        cmd.append("--no-build-isolation")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (path,) = out.glob("asynciocomm_bench-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_holds_the_bench_alone(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"asynciocomm_bench"}


def test_the_wheel_ships_every_subpackage(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    expected = [p.relative_to(BENCH).as_posix() for p in PACKAGE.rglob("*.py")
                if "__pycache__" not in p.parts]
    assert len(expected) > 50
    assert [e for e in expected if e not in names] == []


def test_the_console_script_is_the_bench_cli(wheel: zipfile.ZipFile) -> None:
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert "asynciocomm-bench = asynciocomm_bench.cli:main" in wheel.read(entry_points).decode()


def test_the_command_is_installed_beside_the_interpreter() -> None:
    # CI does not activate the virtual environment, so PATH need not contain it.
    assert shutil.which("asynciocomm-bench", path=os.path.dirname(sys.executable)) is not None

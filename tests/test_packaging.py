"""The transport's wheel holds asynciocomm alone, and its tests need nothing else.

The benchmark is a distribution of its own (``bench/``, tested there): nothing of
it is shipped in this wheel, and no module of the product's suite imports it, so
that ``pip install -e ".[test]"`` runs the whole suite. The wheel is built from a
copy of the sources (so the build leaves nothing in the checkout), pure Python
(the compiled twins change no name), and read as a zip file.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.sources import copy_sources

ROOT = Path(__file__).resolve().parent.parent
#: What the build needs of the checkout; the rest (tests, bench, caches) only slows the copy.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "asynciocomm")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.c", "*.egg-info")


def _offline_build_possible() -> bool:
    """Whether this environment holds the build requirements of pyproject.toml
    (minus Cython, which a pure build does not use), so pip need not fetch them."""
    try:
        major = int(importlib.metadata.version("setuptools").split(".")[0])
        importlib.metadata.version("wheel")
    except importlib.metadata.PackageNotFoundError:
        return False
    return major >= 77


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("wheel")
    copy_sources(src, SOURCES, IGNORE)
    cmd = [sys.executable, "-m", "pip", "wheel", str(src), "-w", str(out), "--no-deps", "-q"]
    if _offline_build_possible():
        cmd.append("--no-build-isolation")
    env = {**os.environ, "ASYNCIOCOMM_PURE_PYTHON": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (path,) = out.glob("asynciocomm-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_has_only_asynciocomms_top_level_names(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    dist_info = {t for t in tops if t.startswith("asynciocomm-") and t.endswith(".dist-info")}
    assert len(dist_info) == 1
    assert tops - dist_info == {"asynciocomm"}


def test_the_wheel_ships_every_module_and_its_data(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    package = ROOT / "asynciocomm"
    expected = [p.relative_to(ROOT).as_posix() for p in package.rglob("*")
                if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts
                and not p.name.startswith("_c")]
    assert {"asynciocomm/asynciocomm.yaml", "asynciocomm/asynciocomm-schema.yaml"} <= set(expected)
    assert [e for e in expected if e not in names] == []


def test_the_wheel_has_no_console_script(wheel: zipfile.ZipFile) -> None:
    """The command ``asynciocomm-bench`` is the bench's; the transport has none."""
    entry_points = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points[0]).decode()
    assert "[console_scripts]" not in text
    assert "asyncio = asynciocomm.backend:AsyncioBackend" in text


def _bench_imports(path: Path) -> list[str]:
    """The imports of the bench's package in ``path``, at any depth of the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "asynciocomm_bench"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [node.module] if node.module.split(".")[0] == "asynciocomm_bench" else []
    return found


def test_the_product_suite_imports_nothing_of_the_bench() -> None:
    wrong = [f"{p.relative_to(ROOT)}: {name}" for p in (ROOT / "tests").rglob("*.py")
             for name in _bench_imports(p)]
    assert not wrong, wrong


def test_a_bench_import_would_be_found(tmp_path: Path) -> None:
    """The scan can fail: both forms, and one deferred into a function."""
    mod = tmp_path / "m.py"
    mod.write_text("import asynciocomm_bench.cli\ndef f():\n"
                   "    from asynciocomm_bench.common import sdist\n")
    assert _bench_imports(mod) == ["asynciocomm_bench.cli", "asynciocomm_bench.common"]

"""The wheel installs only asynciocomm's own top-level names.

The benchmark is kept in the folder ``bench/`` but installs as ``asynciocomm_bench``:
a top-level ``bench`` in site-packages would collide with any other project's, and
``import bench`` in a user's environment would get ours. The wheel is built from a
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
BENCH = ROOT / "bench"
#: What the build needs of the checkout; the rest (results, tests, caches) only slows the copy.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "asynciocomm", "bench")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.c", "results", "*.egg-info")


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
    assert tops - dist_info == {"asynciocomm", "asynciocomm_bench"}


def test_the_wheel_ships_every_bench_subpackage_and_its_data(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    expected = []
    for folder, dirs, files in os.walk(BENCH):
        dirs[:] = [d for d in dirs if d not in ("results", "__pycache__")]
        rel = Path(folder).relative_to(BENCH)
        if "__init__.py" not in files:
            continue
        expected += [(Path("asynciocomm_bench") / rel / f).as_posix()
                     for f in files if f.endswith((".py", ".yaml"))]
    assert expected and not [e for e in expected if e not in names]


def test_the_console_script_names_the_installed_package(wheel: zipfile.ZipFile) -> None:
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "asynciocomm-bench = asynciocomm_bench.cli:main" in text


def _names_bench(word: str) -> bool:
    """Whether ``word`` is a module path under the folder's name (``bench.<suite>.<module>``,
    not the file ``bench.yaml``)."""
    head, _, rest = word.partition(".")
    if head != "bench" or not all(part.isidentifier() for part in rest.split(".")):
        return False
    first = rest.split(".")[0]
    return (BENCH / first).is_dir() or (BENCH / f"{first}.py").is_file()


def _old_names(path: Path) -> list[str]:
    """The imports of ``bench`` in ``path`` at any depth of the file, and the strings
    that name one of its modules (for ``python -m``, a preload, a pytest plugin)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "bench"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [node.module] if node.module.split(".")[0] == "bench" else []
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [w for w in node.value.split() if _names_bench(w.strip("`'\"(),:"))]
    return found


def test_the_benchmark_is_imported_by_its_installed_name_only() -> None:
    """A module imported as ``bench.x`` and as ``asynciocomm_bench.x`` would be two
    modules with two states; the folder's name is never imported."""
    wrong = []
    for folder in (BENCH, ROOT / "tests"):
        for path in folder.rglob("*.py"):
            if "results" not in path.relative_to(ROOT).parts:
                wrong += [f"{path.relative_to(ROOT)}: {name}" for name in _old_names(path)]
    assert not wrong, wrong

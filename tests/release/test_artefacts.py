"""The release artefacts as a user meets them: ``python -m build`` makes an sdist
and a wheel, ``twine check`` passes, the metadata says what is tested, and the
sdist installs into a fresh virtualenv of every CPython the machine has, with a C
compiler (the compiled twins) and without one (pure Python, said once).

These build and install from PyPI and take minutes, so they run in nox's
``packaging`` session (ASYNCIOCOMM_RELEASE_TESTS=1), not in the product suite.
"""

from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.sources import copy_sources

#: What a release is built from; the rest (tests, bench, caches) is not shipped.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "asynciocomm")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.c", "*.egg-info")
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
TIMEOUT = 900
#: What the build says, once, when it cannot compile (setup.py).
PURE_LINE = "compiled decoder/encoder not built"
#: A comm round trip in the installed package, from outside the checkout.
ROUND_TRIP = """
import asyncio, json
from distributed.comm import connect, listen
from asynciocomm.wire import speedups

async def main():
    async def echo(comm):
        await comm.write(await comm.read())
        await comm.close()
    async with listen("asyncio://127.0.0.1:0", echo) as listener:
        comm = await connect(listener.contact_address)
        await comm.write({"op": "ping", "data": b"x" * 100_000})
        reply = await comm.read()
        await comm.close()
    print(json.dumps({"compiled": speedups.COMPILED, "ok": reply["data"] == b"x" * 100_000}))

asyncio.run(main())
"""


def _interpreter(version: str) -> str | None:
    found = shutil.which(f"python{version}")
    if found is None and sys.version_info[:2] == tuple(map(int, version.split("."))):
        found = sys.executable
    return found


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **kw.pop("env", {})}
    env.pop("ASYNCIOCOMM_PURE_PYTHON", None)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env, **kw)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    src = tmp_path_factory.mktemp("src")
    copy_sources(src, SOURCES, IGNORE)
    out = tmp_path_factory.mktemp("dist")
    # Without flags build makes the sdist, then the wheel from the sdist: a file
    # missing from the sdist fails the wheel.
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(src)])
    (sdist,) = out.glob("asynciocomm-*.tar.gz")
    (wheel,) = out.glob("asynciocomm-*.whl")
    return {"sdist": sdist, "wheel": wheel}


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(z.read(name).decode())


def test_twine_check_passes(dist):
    _run([sys.executable, "-m", "twine", "check", "--strict", str(dist["sdist"]),
          str(dist["wheel"])])


def test_the_metadata_names_each_tested_python_the_licence_and_no_upper_bound(dist):
    meta = _metadata(dist["wheel"])
    classifiers = meta.get_all("Classifier")
    for version in PYTHONS:
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["License-Expression"] == "BSD-3-Clause"
    assert "LICENSE" in meta.get_all("License-File")
    assert meta.get_all("Project-URL")
    requires = {r.split(";")[0].strip() for r in meta.get_all("Requires-Dist")}
    assert "distributed>=2024.12.1" in requires and "dask>=2024.12.1" in requires
    assert not [r for r in requires if r.startswith(("distributed", "dask")) and "<" in r]


def test_the_wheel_holds_asynciocomm_alone_with_its_compiled_twins(dist):
    with zipfile.ZipFile(dist["wheel"]) as z:
        names = z.namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"asynciocomm"}
    assert any(n.startswith("asynciocomm/wire/_cdecoder.") and n.endswith(".so") for n in names)
    assert any(n.startswith("asynciocomm/wire/_cencoder.") and n.endswith(".so") for n in names)
    assert "asynciocomm/asynciocomm.yaml" in names and "asynciocomm/py.typed" in names


def test_the_sdist_holds_the_sources_and_nothing_built(dist):
    with tarfile.open(dist["sdist"]) as t:
        names = [n.split("/", 1)[1] for n in t.getnames() if "/" in n]
    for needed in ("setup.py", "pyproject.toml", "LICENSE", "README.md",
                   "asynciocomm/wire/decoder.py", "asynciocomm/wire/encoder.py",
                   "asynciocomm/asynciocomm.yaml", "asynciocomm/asynciocomm-schema.yaml"):
        assert needed in names, needed
    assert not [n for n in names if n.endswith((".so", ".pyd"))]
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]


def _fresh(tmp_path: Path, version: str) -> Path:
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no python{version} on this machine")
    env_dir = tmp_path / f"venv-{version}"
    _run([python, "-m", "venv", str(env_dir)])
    return env_dir / "bin" / "python"


def _round_trip(python: Path, tmp_path: Path) -> dict:
    done = _run([str(python), "-c", ROUND_TRIP], cwd=tmp_path)  # not the checkout
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("version", PYTHONS)
def test_the_sdist_installs_compiled_and_without_a_compiler_pure(dist, tmp_path, version):
    python = _fresh(tmp_path, version)
    pip = [str(python), "-m", "pip", "install", "-v", "--no-cache-dir"]
    done = _run([*pip, str(dist["sdist"])])
    assert PURE_LINE not in done.stdout + done.stderr
    assert _round_trip(python, tmp_path) == {"compiled": True, "ok": True}
    # The same sdist where no C compiler exists: the build says so once, and the
    # install is pure Python and works.
    done = _run([*pip, "--force-reinstall", "--no-deps", str(dist["sdist"])],
                env={"CC": "/nonexistent/cc", "CXX": "/nonexistent/c++"})
    assert (done.stdout + done.stderr).count(PURE_LINE) == 1, done.stderr[-4000:]
    assert _round_trip(python, tmp_path) == {"compiled": False, "ok": True}


def test_the_wheel_installs_and_runs(dist, tmp_path):
    python = _fresh(tmp_path, f"{sys.version_info[0]}.{sys.version_info[1]}")
    _run([str(python), "-m", "pip", "install", "--no-cache-dir", str(dist["wheel"])])
    assert _round_trip(python, tmp_path) == {"compiled": True, "ok": True}

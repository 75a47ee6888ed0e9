"""The oldest supported release: the transport, interop and byte-identity tests
run again in an environment that holds it, on both loops.

The environment is a virtualenv in the cache directory (tests/pypi.py:
``$ASYNCIOCOMM_CACHE_DIR``, default ``~/.cache/asynciocomm``) holding
distributed and dask at the lower bound of pyproject.toml, installed from PyPI
as a user's would be; it is made once and kept. asynciocomm is installed into it
(editable, with its test extra) by pip's own resolution, which must leave that
release in place, and pytest runs :data:`MODULES` there; this test fails on any
failure there. It is skipped only when PyPI cannot be reached and no such
environment is cached.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests import pypi

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

#: Run there: the self-check and the private names, the bytes and objects of
#: every message kind against distributed's, the comm and the listener, and the
#: takeover against the stock comm
#: (both ways, across processes). The conformance checks and the clusters are
#: left to the by-hand runs of each release (bench/results/compatibility.md):
#: they would double this test's share of CI's 25 minutes and depend on the
#: release only through the same code paths.
MODULES = [
    "tests/serialization/test_selfcheck.py",
    "tests/serialization/test_fast.py",
    "tests/serialization/test_packing.py",
    "tests/serialization/test_pickling.py",
    "tests/serialization/test_arrays.py",
    "tests/test_comm.py",
    "tests/test_listener.py",
    "tests/test_interop.py",
    "tests/test_takeover.py",
]
#: Left out there: a single frame over 2 GiB (a minute on the asyncio loop) checks
#: the socket path only, which no release of distributed changes.
DESELECT = "not test_single_frame_over_2_gib"
#: Seconds for building the environment (downloads included), and for the run.
BUILD_TIMEOUT_S = 900
RUN_TIMEOUT_S = 1500


def oldest() -> str:
    """The lower bound pyproject.toml declares for distributed (and for dask)."""
    text = (ROOT / "pyproject.toml").read_text()
    found = {name: re.search(rf'"{name}\s*>=\s*([0-9][0-9.]*)', text)
             for name in ("distributed", "dask")}
    assert all(found.values()), "pyproject.toml declares no lower bound for distributed or dask"
    versions = {m.group(1) for m in found.values() if m}
    assert len(versions) == 1, f"distributed and dask have different lower bounds: {versions}"
    return versions.pop()


def _pip(env_dir: Path, *args: str, timeout: float = BUILD_TIMEOUT_S) -> None:
    done = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", *args],
        capture_output=True, text=True, timeout=timeout,
        # No compiled twins here: building them in place would rewrite the
        # extension files under ROOT while this interpreter has them loaded; the
        # ones the main install built are used, for the same Python.
        env={**os.environ, "ASYNCIOCOMM_PURE_PYTHON": "1"})
    assert done.returncode == 0, (
        f"pip install {' '.join(args)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")


def _versions(env_dir: Path) -> dict[str, str]:
    done = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c",
         "import json, importlib.metadata as m; "
         "print(json.dumps({n: m.version(n) for n in ('distributed', 'dask')}))"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout))


def environment(version: str) -> Path:
    """The cached environment holding distributed and dask ``version``."""
    name = f"env-distributed-{version}-py{sys.version_info[0]}.{sys.version_info[1]}"
    env_dir = pypi.cache_dir() / name
    marker = env_dir / "asynciocomm-env.json"
    want = {"distributed": version, "dask": version, "python": sys.version}
    if marker.is_file() and json.loads(marker.read_text()) == want:
        return env_dir
    if not pypi.pypi_reachable():
        pytest.skip(f"{pypi.UNREACHABLE} and no environment with distributed {version} "
                    f"is cached at {env_dir}")
    venv.EnvBuilder(clear=True, with_pip=True).create(env_dir)
    _pip(env_dir, f"distributed=={version}", f"dask=={version}")
    marker.write_text(json.dumps(want))
    return env_dir


@pytest.mark.timeout(BUILD_TIMEOUT_S * 2 + RUN_TIMEOUT_S)
def test_the_oldest_release_passes_the_transport_interop_and_byte_tests() -> None:
    version = oldest()
    env_dir = environment(version)
    _pip(env_dir, "-e", f"{ROOT}[test]")  # pip's own resolution, as a user's
    assert _versions(env_dir) == {"distributed": version, "dask": version}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-k", DESELECT, *MODULES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    tail = done.stdout.strip().splitlines()[-1:] or ["no output"]
    print(f"distributed {version}: {tail[0]}")
    assert done.returncode == 0, (
        f"on distributed {version}:\n{done.stdout[-8000:]}{done.stderr[-3000:]}")

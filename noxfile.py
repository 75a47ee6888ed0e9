"""CI's matrix: ``nox`` runs every default session, ``nox -s NAME`` one of them.

Each session makes its own virtualenv from PyPI, installs asynciocomm editable
(the compiled twins are built for that Python, beside the others' in the tree)
and runs pytest there. The matrix, and what each session costs on this project's
2-core CI machine, is in README.md ("Set-up from a clone"); tests/test_readme.py
holds the two together.

- ``tests-3.13``: the whole product suite on the newest CPython, with the newest
  distributed and dask that PyPI has (no upper bound: see pyproject.toml).
- ``core-3.10``, ``core-3.11``, ``core-3.12``: on each other CPython the checks
  that depend most on the interpreter: the conformance checks against stock, the
  differential runner at CI size, the harness under distributed's leak checks,
  the clusters, and the lifetime and cycle checks.
- ``oldest-3.10``: the oldest CPython with the oldest distributed and dask the
  floor admits, the transport, interop and byte-identity tests.
- ``bench-3.13``: the benchmark distribution's own tests.
- ``packaging-3.13``: sdist and wheel built, checked and installed on every
  CPython, with and without a C compiler (tests/release).
- ``lint``: ruff over the product, the bench and the tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
NEWEST = "3.13"
OTHERS = ("3.10", "3.11", "3.12")
OLDEST = "3.10"
#: The checks run on every CPython (see the module docstring for why these).
CORE = [
    "tests/test_conformance.py",
    "tests/test_differential.py",
    "tests/test_harness.py",
    "tests/test_cluster.py",
    "tests/test_lifetime.py",
    "tests/test_gc.py",
]
#: Run against the oldest release: everything that mirrors distributed's private
#: names and bytes, and the comm and takeover against the stock comm.
OLDEST_MODULES = [
    "tests/test_compatibility.py",
    "tests/test_serialization.py",
    "tests/test_packing.py",
    "tests/test_pickling.py",
    "tests/test_arrays.py",
    "tests/test_comm.py",
    "tests/test_listener.py",
    "tests/test_interop.py",
    "tests/test_takeover.py",
]
#: pytest's options in every session: no cache directory in a shared tree.
PYTEST = ("-q", "-p", "no:cacheprovider")

nox.options.sessions = [
    "lint",
    f"tests-{NEWEST}",
    *(f"core-{py}" for py in OTHERS),
    f"oldest-{OLDEST}",
    f"bench-{NEWEST}",
    f"packaging-{NEWEST}",
]
# A CPython the machine lacks is reported as skipped, not failed: the matrix is
# every CPython from 3.10 to 3.13 that the machine has (pyenv's, here).
nox.options.error_on_missing_interpreters = False
nox.options.reuse_existing_virtualenvs = False


def floor() -> str:
    """The lower bound pyproject.toml declares for distributed and dask."""
    text = (ROOT / "pyproject.toml").read_text()
    found = {re.search(rf'"{name}\s*>=\s*([0-9][0-9.]*)', text).group(1)  # type: ignore[union-attr]
             for name in ("distributed", "dask")}
    if len(found) != 1:
        raise ValueError(f"distributed and dask have different lower bounds: {found}")
    return found.pop()


def _versions(session: nox.Session) -> None:
    session.run("python", "-c",
                "import sys, distributed, dask; print('CPython', sys.version.split()[0], "
                "'distributed', distributed.__version__, 'dask', dask.__version__)")


@nox.session(python=NEWEST)
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.8")
    session.run("ruff", "check", "asynciocomm", "bench", "tests", "noxfile.py", "setup.py")


@nox.session(name=f"tests-{NEWEST}", python=NEWEST)
def tests_newest(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    _versions(session)
    session.run("python", "-m", "pytest", *PYTEST, "tests", *session.posargs)


@nox.session(name="core", python=list(OTHERS))
def core(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    _versions(session)
    session.run("python", "-m", "pytest", *PYTEST, *CORE, *session.posargs)


@nox.session(name=f"oldest-{OLDEST}", python=OLDEST)
def oldest(session: nox.Session) -> None:
    version = floor()
    # pip resolves asynciocomm's own requirements with the floor pinned, as a user
    # who has that release would; the session fails if pip moves it.
    session.install("-e", ".[test]", f"distributed=={version}", f"dask=={version}")
    _versions(session)
    session.run("python", "-c",
                f"import distributed, dask; assert distributed.__version__ == dask.__version__"
                f" == {version!r}, (distributed.__version__, dask.__version__)")
    session.run("python", "-m", "pytest", *PYTEST, "-k", "not test_single_frame_over_2_gib",
                *OLDEST_MODULES, *session.posargs)


@nox.session(name=f"bench-{NEWEST}", python=NEWEST)
def bench(session: nox.Session) -> None:
    session.install("-e", ".", "-e", "./bench[test]")
    _versions(session)
    session.run("python", "-m", "pytest", *PYTEST, "bench/tests", *session.posargs)


@nox.session(name=f"packaging-{NEWEST}", python=NEWEST)
def packaging(session: nox.Session) -> None:
    session.install("build", "twine", "pytest>=8", "pytest-asyncio>=1.3", "pytest-timeout>=2.3")
    # asynciocomm itself is not installed here, only built: tests/conftest.py,
    # which imports it and distributed, is left out by --confcutdir.
    session.run("python", "-m", "pytest", *PYTEST, "--confcutdir", "tests/release",
                "tests/release", *session.posargs,
                env={"ASYNCIOCOMM_RELEASE_TESTS": "1"})

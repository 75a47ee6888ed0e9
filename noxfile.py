"""The CPython matrix: ``nox`` runs every default session, ``nox -s NAME`` one of them.

Each session makes its own virtualenv from PyPI, installs asynciocomm editable
(the compiled twins are built for that Python, beside the others' in the tree)
and runs pytest there. README.md ("Pythons and platforms") lists the sessions and
what each has shown so far; CI (``.ci/run``) runs the 3.11 suite, not yet this
matrix.

- ``tests-3.13``: the whole product suite on the newest CPython, with the newest
  distributed and dask that PyPI has (no upper bound: see pyproject.toml).
- ``core-3.10``, ``core-3.11``, ``core-3.12``: on each other CPython the checks
  that depend most on the interpreter: the conformance checks against stock, the
  differential runner at CI size, the harness under distributed's leak checks,
  the clusters, and the lifetime and cycle checks.
- The oldest distributed and dask the floor admits are tested by
  tests/test_oldest_release.py, inside the suite.
- ``packaging-3.13``: sdist and wheel built, checked and installed on every
  CPython, with and without a C compiler (tests/release).
"""

from __future__ import annotations

import nox

NEWEST = "3.13"
OTHERS = ("3.10", "3.11", "3.12")
#: The checks run on every CPython (see the module docstring for why these).
CORE = [
    "tests/test_conformance.py",
    "tests/test_differential.py",
    "tests/test_harness.py",
    "tests/test_cluster.py",
    "tests/test_lifetime.py",
    "tests/test_gc.py",
]
#: pytest's options in every session: no cache directory in a shared tree.
PYTEST = ("-q", "-p", "no:cacheprovider")

nox.options.sessions = [
    f"tests-{NEWEST}",
    *(f"core-{py}" for py in OTHERS),
    f"packaging-{NEWEST}",
]
# A CPython the machine lacks is reported as skipped, not failed: the matrix is
# every CPython from 3.10 to 3.13 that the machine has (pyenv's, here).
nox.options.error_on_missing_interpreters = False
nox.options.reuse_existing_virtualenvs = False


def _versions(session: nox.Session) -> None:
    session.run("python", "-c",
                "import sys, distributed, dask; print('CPython', sys.version.split()[0], "
                "'distributed', distributed.__version__, 'dask', dask.__version__)")


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


@nox.session(name=f"packaging-{NEWEST}", python=NEWEST)
def packaging(session: nox.Session) -> None:
    session.install("build", "twine", "pytest>=8", "pytest-asyncio>=1.3", "pytest-timeout>=2.3")
    # asynciocomm itself is not installed here, only built: tests/conftest.py,
    # which imports it and distributed, is left out by --confcutdir.
    session.run("python", "-m", "pytest", *PYTEST, "--confcutdir", "tests/release",
                "tests/release", *session.posargs,
                env={"ASYNCIOCOMM_RELEASE_TESTS": "1"})

"""The CPython matrix: ``nox`` runs every default session, ``nox -s NAME`` one of them.

Each session makes its own virtualenv from PyPI, installs asynciocomm editable
(the compiled twins are built for that Python, beside the others' in the tree)
and runs pytest there. README.md ("Pythons and platforms") lists the sessions,
what each covers and how long it takes; CI (``.ci/run``) runs all of them, as the
README's test command, ``nox``.

- ``tests-3.13``: the whole product suite on the newest CPython, with the newest
  distributed and dask that PyPI has (no upper bound: see pyproject.toml).
- ``core-3.10``, ``core-3.11``, ``core-3.12``: on each other CPython the checks
  that depend most on the interpreter: the conformance checks against stock, the
  differential runner at CI size, the harness under distributed's leak checks,
  the clusters, and the lifetime and cycle checks.
- ``oldest-3.10``: the oldest distributed and dask that the floor admits
  (pyproject.toml) on the oldest CPython, installed by pip's own resolution
  beside asynciocomm, and the modules that depend on the release (the self-check
  and the private names, the bytes of every message kind, the comm, the
  listener, interop with the stock comm, the takeover).
- ``bench-3.13``: the bench's own suite (bench/tests), the bench installed as a
  distribution of its own beside the transport.
- ``packaging-3.13``: sdist and wheel built, checked and installed on every
  CPython, with and without a C compiler (tests/release).
- ``lint``: ruff over the product, its tests and the bench ([tool.ruff]).
"""

from __future__ import annotations

import os

import nox

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
#: pytest's options in every session: no cache directory in a shared tree.
PYTEST = ("-q", "-p", "no:cacheprovider")

#: The modules ``oldest`` runs: those whose behaviour depends on distributed's
#: release. The conformance checks and clusters go through the same code paths
#: (bench/results/compatibility.md has the by-hand runs of each release).
OLDEST_MODULES = [
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
#: Left out there: a single frame over 2 GiB (a minute on the asyncio loop)
#: checks the socket path only, which no release of distributed changes.
OLDEST_DESELECT = "not test_single_frame_over_2_gib"

nox.options.sessions = [
    "lint",
    f"tests-{NEWEST}",
    *(f"core-{py}" for py in OTHERS),
    f"oldest-{OLDEST}",
    f"bench-{NEWEST}",
    f"packaging-{NEWEST}",
]
# A CPython the machine lacks is reported as skipped, not failed, on a
# contributor's machine: the matrix is every CPython from 3.10 to 3.13 it has.
# CI (.ci/run) sets ASYNCIOCOMM_ALL_PYTHONS=1: there a missing one fails the run,
# so that a green CI means every session ran.
nox.options.error_on_missing_interpreters = bool(os.environ.get("ASYNCIOCOMM_ALL_PYTHONS"))
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


def _floor() -> str:
    """The lower bound pyproject.toml declares for distributed (and for dask)."""
    import re

    with open("pyproject.toml") as f:
        text = f.read()
    found = {re.search(rf'"{name}\s*>=\s*([0-9][0-9.]*)', text).group(1)  # type: ignore[union-attr]
             for name in ("distributed", "dask")}
    if len(found) != 1:
        raise ValueError(f"distributed and dask have different lower bounds: {found}")
    return found.pop()


@nox.session(name=f"oldest-{OLDEST}", python=OLDEST)
def oldest(session: nox.Session) -> None:
    floor = _floor()
    session.install(f"distributed=={floor}", f"dask=={floor}")
    session.install("-e", ".[test]")  # pip's own resolution must keep the floor
    session.run("python", "-c",
                "import distributed, dask, sys; "
                f"assert distributed.__version__ == dask.__version__ == {floor!r}, "
                "(distributed.__version__, dask.__version__); "
                "print('CPython', sys.version.split()[0], 'distributed', distributed.__version__)")
    session.run("python", "-m", "pytest", *PYTEST, "-k", OLDEST_DESELECT, *OLDEST_MODULES,
                *session.posargs)


@nox.session(name=f"bench-{NEWEST}", python=NEWEST)
def bench(session: nox.Session) -> None:
    session.install("-e", ".", "-e", "./bench[test]")
    _versions(session)
    session.chdir("bench")
    session.run("python", "-m", "pytest", *PYTEST, *session.posargs)


@nox.session(python=NEWEST)
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.8")
    session.run("ruff", "check", ".")


@nox.session(name=f"packaging-{NEWEST}", python=NEWEST)
def packaging(session: nox.Session) -> None:
    session.install("build", "twine", "pytest>=8", "pytest-asyncio>=1.3", "pytest-timeout>=2.3")
    # asynciocomm itself is not installed here, only built: tests/conftest.py,
    # which imports it and distributed, is left out by --confcutdir.
    session.run("python", "-m", "pytest", *PYTEST, "--confcutdir", "tests/release",
                "tests/release", *session.posargs,
                env={"ASYNCIOCOMM_RELEASE_TESTS": "1"})

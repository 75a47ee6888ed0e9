"""Shared test set-up.

Every async test runs on both event loops. The loop is created through
distributed's own ``distributed.admin.event-loop`` setting (no loop policy is
installed), and that setting stays in force while the test runs, so that anything
the test starts (nannies, CLI subprocesses via :func:`loop_env`) uses the same loop.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from collections.abc import Iterator

import dask
import pytest

from tests.peers.loops import loop_factory

#: uvloop is not installed where it does not exist (Windows; see pyproject's marker):
#: there every test runs on the plain asyncio loop only, as distributed does.
LOOPS = ("asyncio", "uvloop") if importlib.util.find_spec("uvloop") else ("asyncio",)
#: tests/harness runs in a pytest process of its own (tests/test_harness.py),
#: which sets ASYNCIOCOMM_HARNESS.
collect_ignore = [] if os.environ.get("ASYNCIOCOMM_HARNESS") else ["harness"]
#: tests/release builds and installs the artefacts from PyPI, in nox's packaging
#: session only (ASYNCIOCOMM_RELEASE_TESTS; the module says why).
if not os.environ.get("ASYNCIOCOMM_RELEASE_TESTS"):
    collect_ignore.append("release")


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict:
    return {name: loop_factory(name) for name in LOOPS}


@pytest.fixture(autouse=True)
def loop_name(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The event loop this test runs on (None for synchronous tests)."""
    callspec = getattr(request.node, "callspec", None)
    factory = callspec.params.get("_asyncio_loop_factory") if callspec else None
    name = getattr(factory, "loop_name", None)
    if name is None:
        yield None
        return
    with dask.config.set({"distributed.admin.event-loop": name}):
        yield name


def running_loop_name() -> str:
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def loop_env(name: str | None) -> dict[str, str]:
    """Environment for a subprocess that must use the same event loop."""
    env = dict(os.environ)
    if name:
        env["DASK_DISTRIBUTED__ADMIN__EVENT_LOOP"] = name
    return env


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory):
    """A throwaway PKI (see tests/certs.py), generated once per session."""
    from tests.certs import make_certs

    return make_certs(str(tmp_path_factory.mktemp("certs")))


# asynciocomm's self-check runs at a process's first comm: here, before any test
# changes what it compares, so that no test's monkeypatch turns the fast codec
# off for the tests after it.
from asynciocomm.serialization import choice as _codecs  # noqa: E402
from tests.variants import OURS, VARIANTS, variant_fixture  # noqa: E402

_codecs.decided()

#: Every transport variant, the stock tcp/tls comms included (as the reference).
variant = variant_fixture(VARIANTS)
#: Only asynciocomm's variants.
our_variant = variant_fixture(OURS)


@pytest.fixture
def tls_reads_past_pause(request: pytest.FixtureRequest, loop_name: str | None,
                         variant: object) -> None:
    """Strict xfail where the test's transport is CPython 3.10's own TLS
    transport (asyncio loop): it goes on calling data_received after
    pause_reading() (CPython gh-89322, fixed in 3.11 by the sslproto rewrite of
    gh-88177). Measured with a bare asyncio.Protocol pausing in its first
    data_received while 64 records arrive: 6 more calls on 3.10's asyncio
    loop, none on 3.11 nor on uvloop."""
    if sys.version_info < (3, 11) and loop_name == "asyncio" and getattr(variant, "tls", False):
        request.applymarker(pytest.mark.xfail(
            strict=True, reason="CPython 3.10 asyncio SSL transport calls data_received "
                                "after pause_reading() (gh-89322, fixed in 3.11 by gh-88177)"))

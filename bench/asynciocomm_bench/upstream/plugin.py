"""The pytest plugin of ``asynciocomm-bench upstream`` (``-p asynciocomm_bench.upstream.plugin``).

It runs inside each pytest process that runs distributed's own test modules, and
is imported before the source tree's ``conftest.py`` and before any test module,
so before any comm is made:

* ``ASYNCIOCOMM_UPSTREAM_COMM=takeover``: asynciocomm serves ``tcp://`` and ``tls://``
  in this process (processes the tests start get it through the preload settings
  in their environment); ``stock``: the stock comm, checked to be in place.
* ``ASYNCIOCOMM_UPSTREAM_CERTS``: where distributed's test certificates are. They
  are in the source tree, not in the installed package, where
  ``distributed.utils_test.get_cert`` looks for them.
* ``ASYNCIOCOMM_UPSTREAM_EVENTS``: a file that gets one JSON line per event, as it
  happens: the collected node ids, each test's start, each test's outcome. A
  JUnit report is written only when the session ends, so a run stopped because a
  test hung (or a process that crashed) would lose every outcome; these lines
  keep them, and name the test that was running.
* Tests that pytest-asyncio runs (distributed's older modules) get the event loop
  that ``distributed.admin.event-loop`` names, as distributed's own ``gen_test``
  does, through pytest-asyncio's loop-factory hook (no loop policy is installed).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

import asynciocomm

COMM = os.environ.get("ASYNCIOCOMM_UPSTREAM_COMM", "stock")
if COMM == "takeover":
    asynciocomm.install()
elif asynciocomm.installed():
    raise RuntimeError("the stock run found asynciocomm serving tcp:// already")

if os.environ.get("ASYNCIOCOMM_UPSTREAM_CERTS"):
    import distributed.utils_test

    distributed.utils_test.certs_dir = os.environ["ASYNCIOCOMM_UPSTREAM_CERTS"]

#: Characters of a failure's message kept.
MESSAGE_CHARS = 400
#: The phases' reports of the test running now, by node id.
_reports: dict[str, list[pytest.TestReport]] = {}


def _event_loop() -> str:
    import dask

    return str(dask.config.get("distributed.admin.event-loop"))


def _emit(event: dict[str, Any]) -> None:
    path = os.environ.get("ASYNCIOCOMM_UPSTREAM_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(event) + "\n")


class _LoopFactories:
    """The pytest-asyncio hook, registered only where that plugin runs."""

    @pytest.hookimpl
    def pytest_asyncio_loop_factories(self, config: Any, item: Any) -> dict[str, Any]:
        import asyncio

        from distributed.config import get_loop_factory

        return {_event_loop(): get_loop_factory() or asyncio.new_event_loop}


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("asyncio"):
        config.pluginmanager.register(_LoopFactories(), "asynciocomm-upstream-loops")


def pytest_report_header(config: pytest.Config) -> str:
    served = "asynciocomm (takeover)" if asynciocomm.installed() else "stock"
    return (f"asynciocomm-bench upstream: tcp:// and tls:// served by {served}, "
            f"event loop {_event_loop()}")


def pytest_collection_finish(session: pytest.Session) -> None:
    _emit({"collected": [item.nodeid for item in session.items]})


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:  # a module that cannot be collected is one failed entry
        _emit({"test": report.nodeid, "outcome": "error", "message": _message(report),
               "seconds": 0.0})


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _reports[nodeid] = []
    _emit({"start": nodeid})


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _reports.setdefault(report.nodeid, []).append(report)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    reports = _reports.pop(nodeid, [])
    outcome, message = combine(reports)
    seconds = sum(r.duration for r in reports)
    _emit({"test": nodeid, "outcome": outcome, "message": message, "seconds": seconds})


def combine(reports: list[pytest.TestReport]) -> tuple[str, str]:
    """One outcome of a test's setup, call and teardown reports: ``passed``,
    ``failed`` (the call), ``error`` (setup or teardown), ``skipped`` or ``xfailed``."""
    for r in reports:
        if r.failed:
            return ("failed" if r.when == "call" else "error"), _message(r)
        if r.skipped:
            return ("xfailed" if hasattr(r, "wasxfail") else "skipped"), _message(r)
    return "passed", ""


def _message(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        text = str(longrepr[-1])
    elif hasattr(report, "wasxfail"):
        text = str(report.wasxfail)
    else:
        crash = getattr(longrepr, "reprcrash", None)
        if crash is not None:
            text = crash.message
        else:  # a collection error: its traceback ends with the exception
            text = str(longrepr or "").strip()[-MESSAGE_CHARS:]
    return text.strip()[:MESSAGE_CHARS]

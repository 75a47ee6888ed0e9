"""``asynciocomm-bench upstream`` on a synthetic source tree: a root conftest.py
as distributed's (its fixtures, its resource-leak plugin, --runslow), a
``distributed`` package that must never be imported (the runs use the installed
one), and a few tests written with ``distributed.utils_test``. Two of them pass
only where the stock comm serves ``tcp://``: in the test process and in a
nanny's worker process, so the takeover must reach both for them to differ."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from asynciocomm_bench import cli
from asynciocomm_bench.common.options import BenchError
from asynciocomm_bench.upstream import command, compare, runs

CONFTEST = '''
import pytest

from distributed.utils_test import *  # noqa


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="run slow tests")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="need --runslow option to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


pytest_plugins = ["distributed.pytest_resourceleaks"]
'''

TESTS = '''
import pytest

from distributed import Nanny
from distributed.comm import connect, listen
from distributed.utils_test import gen_cluster, gen_test, get_cert, inc

STOCK = "distributed.comm.tcp"


@gen_test()
async def test_echo_on_stock():
    async def echo(comm):
        await comm.write(await comm.read())
        await comm.close()

    async with listen("tcp://127.0.0.1:0", echo) as listener:
        comm = await connect(listener.contact_address)
        await comm.write({"x": 1})
        assert await comm.read() == {"x": 1}
        served_by = type(comm).__module__
        await comm.close()
    assert served_by == STOCK


@gen_cluster(client=True, Worker=Nanny, nthreads=[("", 1)])
async def test_nanny_worker_on_stock(c, s, a):
    def served_by(dask_worker):
        return type(dask_worker.batched_stream.comm).__module__

    assert set((await c.run(served_by)).values()) == {STOCK}


@gen_cluster(client=True)
async def test_cluster_roundtrip(c, s, a, b):
    assert await c.submit(inc, 1) == 2
    assert get_cert("tls-ca-cert.pem").endswith("tls-ca-cert.pem")


def test_fails_everywhere():
    assert "stock" == "takeover"


@pytest.mark.slow
def test_slow():
    pass


class TestGroup:
    def test_in_a_class(self):
        pass
'''

MODULE = "distributed/tests/test_tiny.py"
#: A module that cannot be imported: one failed entry, and the other modules still run.
BROKEN = "distributed/tests/test_broken.py"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "distributed-src"
    tests = root / "distributed" / "tests"
    tests.mkdir(parents=True)
    (root / "conftest.py").write_text(CONFTEST)
    (root / "distributed" / "__init__.py").write_text(
        "raise ImportError('the source tree was imported instead of the installed "
        "distributed')\n")
    (tests / "__init__.py").write_text("")
    (tests / MODULE.rsplit("/", 1)[1]).write_text(TESTS)
    (tests / BROKEN.rsplit("/", 1)[1]).write_text("import no_such_module_here\n")
    (tests / "tls-ca-cert.pem").write_text("not read by the test\n")
    return root


def _args(source: Path, out: Path, **kw: object) -> argparse.Namespace:
    modules = f"{MODULE},{BROKEN}"
    argv = ["upstream", "--source", str(source), "--modules", modules, "--loops", "asyncio",
            "--reruns", "0", "--run-timeout", "300", "--out", str(out), "--quiet"]
    for key, value in kw.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return cli.build_parser().parse_args(argv)


@pytest.mark.slow
def test_upstream_tells_each_class_in_every_process(source: Path, tmp_path: Path) -> None:
    out = command.run(_args(source, tmp_path / "out"))
    doc = json.loads((out / "upstream.json").read_text())
    broken = next(v for v in doc["verdicts"] if v["test"] == BROKEN)
    assert broken["class"] == "failed on both"
    assert "no_such_module_here" in broken["stock"]["message"]
    classes = {v["test"].split("::", 1)[1]: v["class"] for v in doc["verdicts"]
               if v["test"] != BROKEN}
    assert classes == {"test_echo_on_stock": "differs",
                       "test_nanny_worker_on_stock": "differs",
                       "test_cluster_roundtrip": "passed on both",
                       "test_fails_everywhere": "failed on both",
                       "test_slow": "skipped on both",
                       "TestGroup::test_in_a_class": "passed on both"}
    for v in doc["verdicts"]:
        if v["class"] == "differs":
            assert v["stock"]["outcome"] == "passed"
            assert v["takeover"]["outcome"] == "failed"
            assert "asynciocomm" in v["takeover"]["message"]
    assert [(r["comm"], r["loop"]) for r in doc["runs"]] == [
        ("stock", "asyncio"), ("takeover", "asyncio")]
    text = (out / "upstream.md").read_text()
    assert f"| `{MODULE}` | asyncio | 2 | 1 | 1 | 2 |" in text
    assert "## Differences (2)" in text and "## Failed on both (2)" in text
    assert f"| `{BROKEN}` | asyncio | 0 | 1 | 0 | 0 |" in text
    assert list(source.rglob("__pycache__")) == []  # nothing written into the tree


def _run(comm: str, outcomes: dict[str, str]) -> runs.Run:
    return runs.Run(comm, "uvloop", outcomes={
        k: runs.Outcome(v) for k, v in outcomes.items()})


def test_differences_are_rerun_and_told_consistent_or_flaky() -> None:
    found = compare.verdicts([
        _run("stock", {"m.py::a": "passed", "m.py::b": "passed", "m.py::c": "error"}),
        _run("takeover", {"m.py::a": "failed", "m.py::b": "failed", "m.py::c": "failed"})])
    assert [v.klass for v in found] == ["differs", "differs", "failed on both"]
    assert all(v.consistent is None for v in found)
    compare.add_reruns(found, [
        _run("stock", {"m.py::a": "passed", "m.py::b": "passed"}),
        _run("takeover", {"m.py::a": "error", "m.py::b": "passed"}),
        _run("stock", {"m.py::a": "passed"}),  # b's run died before b: missing
        _run("takeover", {"m.py::a": "failed", "m.py::b": "failed"})])
    a, b, c = found
    assert a.reruns == {"stock": ["passed", "passed"], "takeover": ["failed", "failed"]}
    assert a.consistent is True
    assert b.reruns == {"stock": ["passed", "missing"], "takeover": ["passed", "failed"]}
    assert b.consistent is False
    assert c.reruns == {} and c.consistent is None
    assert compare.counts(found) == {("m.py", "uvloop"): {
        "passed on both": 0, "failed on both": 1, "skipped on both": 0, "differs": 2}}


HANGS = '''
import os
import signal
import time


def test_a_first():
    pass


def test_b_hangs():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # pytest-timeout's too
    time.sleep(600)


def test_c_crashes():
    os.kill(os.getpid(), signal.SIGKILL)


def test_d_after():
    pass
'''


@pytest.mark.slow
def test_a_hung_or_crashed_test_is_told_and_the_run_goes_on(source: Path,
                                                            tmp_path: Path) -> None:
    (source / "distributed" / "tests" / "test_hang.py").write_text(HANGS)
    run = runs.run("stock", "asyncio", source, ["distributed/tests/test_hang.py"],
                   tmp_path, "hang", runslow=False, test_timeout=2, run_timeout=120,
                   extra=[], log=lambda *_: None)
    got = {test.split("::")[1]: o.outcome for test, o in run.outcomes.items()}
    assert got == {"test_a_first": "passed", "test_b_hangs": "hung",
                   "test_c_crashes": "crashed", "test_d_after": "passed"}
    assert len(run.commands) == 3 and not run.timed_out
    assert run.commands[1][-2:] == [f"{source}/distributed/tests/test_hang.py::{t}"
                                    for t in ("test_c_crashes", "test_d_after")]
    found = compare.verdicts([run, runs.Run("takeover", "asyncio", outcomes={
        t: runs.Outcome("passed") for t in run.outcomes})])
    assert [v.klass for v in found] == ["passed on both", "differs", "differs",
                                        "passed on both"]


def test_bad_arguments_are_refused(source: Path, tmp_path: Path) -> None:
    for kw in ({"modules": "distributed/tests/test_nothing.py"}, {"loops": "trio"},
               {"reruns": -1}):
        with pytest.raises(BenchError):
            command.run(_args(source, tmp_path, **kw))
    with pytest.raises(BenchError):
        command.run(_args(source, tmp_path, modules=BROKEN.replace("broken", "none")))
    with pytest.raises(BenchError):
        command.run(_args(tmp_path / "nowhere", tmp_path))

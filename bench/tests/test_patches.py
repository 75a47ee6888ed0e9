"""The upstream drafts in patches/ apply to the distributed release they are
drafted against and do what they say.

The sdist of that release (patches/README.md names it) is taken from
$ASYNCIOCOMM_DISTRIBUTED_SDIST (a path to the .tar.gz), else from the cache
directory ($ASYNCIOCOMM_CACHE_DIR, default ~/.cache/asynciocomm), else
downloaded from PyPI into that cache. All patches are applied in order, with
``git apply -p1``, to a temporary extraction. The patched package is then
imported in subprocesses whose PYTHONPATH starts with the patched tree, so the
distributed installed in this test process is never touched.

Each check runs against the patched tree (it must pass) and against the
pristine tree (it must fail), so that every check shows its patch's effect.
The whole module is skipped only when PyPI cannot be reached and no sdist is
cached.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from asynciocomm_bench.common import sdist as sdists

ROOT = Path(__file__).resolve().parents[2]
PATCHES_DIR = ROOT / "patches"
PATCHES = sorted(PATCHES_DIR.glob("[0-9][0-9][0-9][0-9]-*.patch"))


def _base_version() -> str:
    """The release the drafts are against, as patches/README.md names it."""
    text = (PATCHES_DIR / "README.md").read_text()
    m = re.search(r"against the \*\*distributed ([0-9][0-9.]*) sdist\*\*", text)
    assert m, "patches/README.md does not name the distributed sdist the drafts are against"
    return m.group(1)


VERSION = _base_version()
SDIST_NAME = f"distributed-{VERSION}.tar.gz"


def _get_sdist() -> Path:
    path, how = sdists.fetch(VERSION)
    if path is None and how.startswith(sdists.UNREACHABLE):
        pytest.skip(f"{how}: cannot check the patches against the distributed "
                    f"{VERSION} sdist")
    assert path is not None, how
    return path


def _extract(sdist: Path, dest: Path) -> Path:
    with tarfile.open(sdist) as tf:
        tf.extractall(dest, filter="data")
    tree = dest / f"distributed-{VERSION}"
    assert (tree / "distributed" / "comm" / "tcp.py").is_file()
    return tree


@pytest.fixture(scope="module")
def sdist() -> Path:
    return _get_sdist()


@pytest.fixture(scope="module")
def pristine_tree(sdist, tmp_path_factory) -> Path:
    return _extract(sdist, tmp_path_factory.mktemp("pristine"))


@pytest.fixture(scope="module")
def patched(sdist, tmp_path_factory):
    """Apply every patch in order; record which ones applied"""
    tree = _extract(sdist, tmp_path_factory.mktemp("patched"))
    results = {}
    for patch in PATCHES:
        check = subprocess.run(
            ["git", "apply", "--check", "-p1", str(patch)],
            cwd=tree, capture_output=True, text=True, timeout=60,
        )
        if check.returncode == 0:
            subprocess.run(
                ["git", "apply", "-p1", str(patch)],
                cwd=tree, check=True, capture_output=True, timeout=60,
            )
        results[patch.name] = check.returncode, check.stderr
    return tree, results


@pytest.fixture(scope="module")
def patched_tree(patched) -> Path:
    tree, results = patched
    failed = {k: v for k, v in results.items() if v[0] != 0}
    assert not failed, f"patches that no longer apply: {failed}"
    return tree


# --------------------------------------------------------------------------- #
# The checks, run in a subprocess against a tree
# --------------------------------------------------------------------------- #
DUMMY_PLUGIN = '''
from distributed.comm import tcp


class DummyTCPBackend(tcp.TCPBackend):
    def __init__(self, encrypted):
        self.encrypted = encrypted


class DummyTLSBackend(tcp.TLSBackend):
    def __init__(self, encrypted):
        self.encrypted = encrypted


def factory(encrypted):
    return DummyTLSBackend(encrypted) if encrypted else DummyTCPBackend(encrypted)
'''

CHECKS = r'''
import asyncio, json, os, socket, sys, traceback

import distributed
from distributed import Scheduler, Worker
from distributed.comm import connect, listen, tcp, ws
from distributed.comm.registry import backends, get_backend
from distributed.compatibility import asyncio_run
from distributed.config import get_loop_factory

TREE = sys.argv[1]
results = {"__file__": distributed.__file__}


async def comm_pair(addr="tcp://127.0.0.1"):
    q = asyncio.Queue()

    async def handle_comm(comm):
        await q.put(comm)

    async with listen(addr, handle_comm) as listener:
        comm = await connect(listener.contact_address)
        serv = await q.get()
    return comm, serv


async def check_0001():
    b, s = get_backend("tcp"), get_backend("tls")
    assert type(b).__module__ == "dummy_tcp_backend", f"tcp:// served by {type(b)}"
    assert (b.encrypted, s.encrypted) == (False, True), (b.encrypted, s.encrypted)
    assert type(s).__module__ == "dummy_tcp_backend", f"tls:// served by {type(s)}"
    comm, serv = await comm_pair()
    await comm.write({"x": 1})
    assert await serv.read() == {"x": 1}
    await comm.close(); await serv.close()
    return f"tcp:// -> {type(b).__module__}.{type(b).__name__}; round trip ok"


class IPConnector(tcp.TCPConnector):
    prefix = "iptest://"


class IPListener(tcp.TCPListener):
    prefix = "iptest://"


class IPBackend(tcp.BaseTCPBackend):
    _connector_class = IPConnector
    _listener_class = IPListener


async def check_0002():
    backends["iptest"] = IPBackend()
    async with Scheduler(protocol="iptest", host="127.0.0.1", dashboard_address=":0") as s:
        async with Worker(s.address, nthreads=1) as w:
            got = w.listener.default_host
            assert got == "127.0.0.1", f"worker on iptest:// got default_host={got!r}"
            assert w.address.startswith("iptest://127.0.0.1:"), w.address
            return f"worker on iptest:// got default_host={got!r}, address {w.address}"


async def check_0003():
    comm, serv = await comm_pair()
    calls = []
    for name in ("read_bytes", "read_into"):
        orig = getattr(serv.stream, name)
        def wrapper(*a, _orig=orig, _name=name, **k):
            calls.append(_name)
            return _orig(*a, **k)
        setattr(serv.stream, name, wrapper)
    msgs = [{"i": i, "data": b"x" * 1000} for i in range(3)]
    for m in msgs:
        await comm.write(m)
    for _ in range(500):  # let Tornado buffer what has arrived, without consuming it
        if serv.stream._read_buffer_size >= 3000:
            break
        serv.stream._read_to_buffer_loop()
        await asyncio.sleep(0.01)
    for m in msgs:
        assert await serv.read() == m
    await comm.close(); await serv.close()
    assert calls == ["read_into"] * 3, f"3 buffered messages took calls {calls}"
    return f"3 buffered messages read with calls {calls}"


async def check_0004():
    with socket.socket() as sock:
        tcp.set_tcp_timeout(sock)
        ka = sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
        cnt = sock.getsockopt(socket.SOL_TCP, socket.TCP_KEEPCNT)
        uto = sock.getsockopt(socket.SOL_TCP, 18)
    assert (ka, cnt) == (1, 10), (ka, cnt)
    return f"plain socket: SO_KEEPALIVE={ka} TCP_KEEPCNT={cnt} TCP_USER_TIMEOUT={uto}ms"


async def check_0005():
    from distributed.comm import get_tcp_server_address
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        addr = get_tcp_server_address(server)
    finally:
        server.close()
        await server.wait_closed()
    assert addr[:2] == ("127.0.0.1", port), addr
    return f"asyncio.Server -> {addr[:2]}"


class SecureListener(tcp.TCPListener):
    prefix = "securetest://"
    encrypted = True


class SecureConnector(tcp.TCPConnector):
    prefix = "securetest://"


class SecureBackend(tcp.BaseTCPBackend):
    _connector_class = SecureConnector
    _listener_class = SecureListener


async def check_0006():
    assert getattr(ws.WSSListener, "encrypted", None) is True, "WSSListener.encrypted"
    backends["securetest"] = SecureBackend()
    # jupyter_server is not needed for the branch under test: flip the flag
    # between construction and start
    s = Scheduler(protocol="securetest", host="127.0.0.1", dashboard_address=":0")
    s.jupyter = True
    try:
        await s
        schemes = [l.contact_address.split("://")[0] for l in s.listeners]
        env = os.environ.get("DASK_SCHEDULER_ADDRESS", "")
    finally:
        s.jupyter = False
        await s.close()
    assert schemes == ["securetest", "tcp"], schemes
    assert env.startswith("tcp://"), env
    return f"encrypted scheduler listeners: {schemes}, DASK_SCHEDULER_ADDRESS={env}"


async def check_0007():
    import contextlib
    from distributed.metrics import ContextMeter, context_meter
    cm = context_meter.meter("x")
    assert not isinstance(cm, contextlib._GeneratorContextManager), type(cm).__name__
    # The behaviour the patch keeps: nested seconds are subtracted, in order
    meter = ContextMeter()
    got = []
    ticks = iter([0.0, 1.0, 21.0, 100.0])
    with meter.add_callback(lambda label, value, unit: got.append((label, value, unit))):
        with meter.meter("outer", func=lambda: next(ticks)):
            with meter.meter("inner", func=lambda: next(ticks)):
                pass
    assert got == [("inner", 20.0, "seconds"), ("outer", 80.0, "seconds")], got
    return f"meter() returns {type(cm).__name__}; nested metrics {got}"


async def check_0008():
    import pickle as stdlib_pickle
    from array import array
    from distributed.protocol import pickle as dask_pickle
    from distributed.protocol.serialize import dask_dumps
    calls = []
    dumps = dask_pickle.dumps
    dask_pickle.dumps = lambda *a, **k: calls.append(a) or dumps(*a, **k)
    try:
        headers = [dask_dumps(array("b", bytes([i])))[0] for i in range(3)]
    finally:
        dask_pickle.dumps = dumps
    expected = stdlib_pickle.dumps(array, protocol=stdlib_pickle.HIGHEST_PROTOCOL)
    assert all(h["type-serialized"] == expected for h in headers), headers
    assert len(calls) <= 1, f"the type was pickled {len(calls)} times for 3 objects"
    return f"type pickled {len(calls)} time(s) for 3 objects, same bytes"


async def check_0009():
    import logging

    import msgpack
    from distributed.protocol import dumps, loads, to_serialize

    frames = [bytearray(f) for f in dumps({"x": to_serialize(b"0123456789" * 10)})]
    header = msgpack.loads(frames[1], use_list=False, strict_map_key=False)
    header["split-offsets"] = (1,)  # past the one frame there is
    frames[1] = bytearray(msgpack.dumps(header, use_bin_type=True))
    logging.getLogger("distributed.protocol.core").disabled = True  # its traceback
    try:
        got = loads([memoryview(f) for f in frames])
    except ValueError as e:
        assert "Malformed header" in str(e), e
        return f"refused: {e}"
    raise AssertionError(f"a split table past the frames was read: {got!r}")


async def check_0010():
    from distributed.batched import BatchedSend
    from distributed.utils_test import freeze_batched_send

    got = []
    for addr in ("inproc://", "asyncio://127.0.0.1"):  # distributed's, asynciocomm's
        comm, serv = await comm_pair(addr)
        b = BatchedSend(interval=0)
        b.start(comm)
        try:
            with freeze_batched_send(b) as locked:
                b.send("held")
                _, msg = await asyncio.wait_for(locked.write_queue.get(), 10)
                assert list(msg) == ["held"], msg
            assert list(await asyncio.wait_for(serv.read(), 10)) == ["held"]
            assert b.comm is comm
        finally:
            b.abort()
            serv.abort()
        got.append(f"{type(comm).__name__}: batch queued while frozen, delivered after")
    return "; ".join(got)


async def check_0011():
    import gc
    from collections import Counter

    from distributed.batched import BatchedSend

    comm, serv = await comm_pair()
    b = BatchedSend(interval="2ms")
    b.start(comm)
    try:
        b.send("warm-up")
        await serv.read()
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for i in range(30):  # each batch waits out the interval after the last
                b.send(i)
                assert list(await asyncio.wait_for(serv.read(), 10)) == [i]
            await asyncio.sleep(0.01)  # the empty expiry after the last batch
            gc.collect()
            garbage = Counter(type(o).__name__ for o in gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    finally:
        b.abort()
        serv.abort()
    assert not garbage, f"cyclic garbage after 30 batches: {dict(garbage)}"
    return "30 batches, each after an expired interval: no cyclic garbage"


async def main():
    for name, fn in sorted(globals().items()):
        if name.startswith("check_"):
            key = name[len("check_"):]
            try:
                detail = await asyncio.wait_for(fn(), 60)
                results[key] = {"ok": True, "detail": detail}
            except BaseException as e:
                results[key] = {"ok": False, "detail": f"{type(e).__name__}: {e}"}


asyncio_run(main(), loop_factory=get_loop_factory())
print("RESULTS " + json.dumps(results), flush=True)
'''


def _run_checks(tree: Path, tmp: Path) -> dict:
    plugin = tmp / "plugin"
    (plugin / "dummy_tcp_backend-0.0.dist-info").mkdir(parents=True, exist_ok=True)
    (plugin / "dummy_tcp_backend.py").write_text(DUMMY_PLUGIN)
    dist_info = plugin / "dummy_tcp_backend-0.0.dist-info"
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: dummy-tcp-backend\nVersion: 0.0\n"
    )
    (dist_info / "entry_points.txt").write_text(
        "[distributed.comm.tcp_backends]\ndummy = dummy_tcp_backend:factory\n"
    )
    script = tmp / "checks.py"
    script.write_text(CHECKS)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(plugin)])
    env["DASK_DISTRIBUTED__COMM__TCP__BACKEND"] = "dummy"
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(tree)],
        env=env, cwd=tmp, capture_output=True, text=True, timeout=180,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS ")]
    assert lines, f"checks crashed (rc={proc.returncode}):\n{proc.stderr[-4000:]}"
    results = json.loads(lines[-1][len("RESULTS "):])
    assert results.pop("__file__").startswith(str(tree)), "imported the wrong tree"
    return results


@pytest.fixture(scope="module")
def patched_results(patched_tree, tmp_path_factory):
    return _run_checks(patched_tree, tmp_path_factory.mktemp("checks_patched"))


@pytest.fixture(scope="module")
def pristine_results(pristine_tree, tmp_path_factory):
    return _run_checks(pristine_tree, tmp_path_factory.mktemp("checks_pristine"))


# --------------------------------------------------------------------------- #
# Tests
# --------------------------------------------------------------------------- #
def test_patches_exist():
    assert len(PATCHES) >= 3
    readme = (PATCHES_DIR / "README.md").read_text()
    for patch in PATCHES:
        text = patch.read_text()
        assert text.startswith("From "), patch.name
        assert re.search(r"^Subject: \[PATCH", text, re.M), patch.name
        assert "\ndiff --git a/distributed/" in text, patch.name
        md = patch.with_suffix(".md")
        assert md.is_file(), f"missing PR description {md.name}"
        assert patch.stem in readme, f"{patch.stem} has no row in patches/README.md"


@pytest.mark.parametrize("patch", [p.name for p in PATCHES])
def test_patch_applies_in_order(patched, patch):
    _, results = patched
    rc, err = results[patch]
    assert rc == 0, f"{patch} no longer applies to distributed {VERSION}:\n{err}"


@pytest.mark.parametrize("patch", [p.name for p in PATCHES])
def test_patch_effect(patched_results, pristine_results, patch):
    key = patch[:4]
    if key not in patched_results:
        pytest.fail(f"no check for {patch}: add check_{key} to CHECKS")
    after, before = patched_results[key], pristine_results[key]
    assert after["ok"], f"{patch} patched: {after['detail']}"
    assert not before["ok"], (
        f"check for {patch} also passes without the patch: {before['detail']}"
    )


def test_missing_tcp_backend_is_a_clear_error(patched_tree):
    env = dict(os.environ, PYTHONPATH=str(patched_tree))
    env["DASK_DISTRIBUTED__COMM__TCP__BACKEND"] = "not-installed"
    proc = subprocess.run(
        [sys.executable, "-c", "import distributed"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "no entry point named 'not-installed'" in proc.stderr
    assert "distributed.comm.tcp_backends" in proc.stderr


def test_asynciocomm_takeover_entry_point(patched_tree, tmp_path):
    """With asynciocomm's tcp_backends entry point installed, the config value
    'asyncio' makes tcp:// resolve to asynciocomm"""
    from importlib.metadata import entry_points

    if not list(entry_points(group="distributed.comm.tcp_backends", name="asyncio")):
        pytest.skip(
            "asynciocomm does not register the 'asyncio' entry point in the "
            "'distributed.comm.tcp_backends' group yet "
            "(asynciocomm.backend:takeover_backend)"
        )
    code = textwrap.dedent(
        """
        from distributed.comm.registry import get_backend
        b, s = get_backend("tcp"), get_backend("tls")
        print(type(b).__module__, type(s).__module__)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(patched_tree))
    env["DASK_DISTRIBUTED__COMM__TCP__BACKEND"] = "asyncio"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    mods = proc.stdout.split()
    assert all(m.startswith("asynciocomm") for m in mods), mods


def test_included_upstream_tests_pass(patched_tree):
    """The tests each patch adds to distributed's suite pass on the patched tree.

    The sdist ships neither distributed's tests nor pytest_resourceleaks.py,
    which its conftest.py loads, hence --noconftest.
    """
    test_files = sorted(
        str(p.relative_to(patched_tree))
        for p in patched_tree.glob("distributed/**/tests/test_*.py")
    )
    assert test_files, "the patches add no tests"
    env = dict(os.environ, PYTHONPATH=str(patched_tree))
    env.pop("DASK_DISTRIBUTED__COMM__TCP__BACKEND", None)
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "--noconftest",
            "-p", "no:cacheprovider",
            *test_files,
        ],
        cwd=patched_tree, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert re.search(r"\d+ passed", proc.stdout)


LEFTOVER_REGISTRATION = '''
import sys
import types

import cloudpickle


def test_leave_a_module_registered_by_value():
    """As distributed's test_pickle.py::test_pickle_by_value_when_registered does"""
    module = types.ModuleType("leftover_registered_by_value")
    sys.modules[module.__name__] = module
    cloudpickle.register_pickle_by_value(module)  # never unregistered
    assert module.__name__ in cloudpickle.list_registry_pickle_by_value()
'''


def test_included_upstream_tests_pass_after_a_leftover_registration(patched_tree, tmp_path):
    """The tests the patches add do not depend on what ran before them in the
    process: here a test that leaves a module registered for pickling by value
    runs first (0008's first draft failed 3 of its tests after one)."""
    test_files = sorted(
        str(p) for p in patched_tree.glob("distributed/**/tests/test_*.py")
    )
    first = tmp_path / "test_0000_leftover_registration.py"
    first.write_text(LEFTOVER_REGISTRATION)
    env = dict(os.environ, PYTHONPATH=str(patched_tree))
    env.pop("DASK_DISTRIBUTED__COMM__TCP__BACKEND", None)
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "--noconftest",
            "-p", "no:cacheprovider", "-p", "no:randomly", "--color=no", "-rA",
            "-c", str(patched_tree / "pyproject.toml"),
            "--rootdir", str(patched_tree),
            str(first), *test_files,
        ],
        cwd=patched_tree, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert re.search(r"^PASSED \S*::test_leave_a_module_registered_by_value$", proc.stdout, re.M)
    assert re.search(r"\d+ passed", proc.stdout)

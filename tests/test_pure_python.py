"""The comm-level suites again, with the compiled decoder and encoder switched off.

``tests/wire/test_decoder.py`` and ``tests/wire/test_encoder.py`` already run every decoder
and encoder test on both implementations; this runs the conformance and
serialization suites in a subprocess with ``ASYNCIOCOMM_PURE_PYTHON=1``, so the
pure-Python fallback is tested end to end by the same single test command. The
conformance checks run there on asynciocomm's own schemes (plain and TLS, both
loops): the stock variants do not use the codec, and the takeover's connections
are the same protocol as ``asyncio://``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from asynciocomm.wire import speedups

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(speedups.FORCE_PURE, reason="this run is already pure Python")
def test_comm_suites_pass_on_pure_python() -> None:
    env = {**os.environ, "ASYNCIOCOMM_PURE_PYTHON": "1"}
    check = subprocess.run(
        [sys.executable, "-c", "import asynciocomm.wire.speedups as s; assert not s.COMPILED"],
        env=env, cwd=ROOT, timeout=60,
    )
    assert check.returncode == 0
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "-k", "not (test_conformance and (stock or takeover))",
         "tests/test_conformance.py", "tests/serialization/test_fast.py"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " passed" in run.stdout


BLOCK_CYTHON = """
import importlib.abc, sys

class NoCython(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("cython", "Cython"):
            raise ImportError(f"{name} is not installed here")
        return None

sys.meta_path.insert(0, NoCython())
"""


def test_the_pure_fallback_runs_without_cython_installed() -> None:
    """Cython is a build-time tool: with it unimportable, the pure decoder and
    encoder load, round-trip a message over a real comm, and the package's
    requirements do not name it."""
    script = BLOCK_CYTHON + """
import asyncio
import asynciocomm.wire.speedups as s
assert not s.COMPILED
from distributed.comm import connect, listen

async def main():
    async def echo(comm):
        await comm.write(await comm.read())
    async with listen("asyncio://127.0.0.1:0", echo) as listener:
        comm = await connect(listener.contact_address)
        await comm.write({"x": b"y" * 100_000})
        assert await comm.read() == {"x": b"y" * 100_000}
        await comm.close()

asyncio.run(main())
print("pure ok")
"""
    env = {**os.environ, "ASYNCIOCOMM_PURE_PYTHON": "1"}
    run = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "pure ok" in run.stdout, run.stderr[-3000:]
    from importlib.metadata import requires

    assert not [r for r in requires("asynciocomm") or [] if r.lower().startswith("cython")]

"""The comm-level suites again, with the compiled decoder and encoder switched off.

``tests/test_decoder.py`` and ``tests/test_encoder.py`` already run every decoder
and encoder test on both implementations; this runs the conformance and
serialization suites in a subprocess with ``ASYNCIOCOMM_PURE_PYTHON=1``, so the
pure-Python fallback is tested end to end by the same single test command.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from asynciocomm import speedups

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(speedups.FORCE_PURE, reason="this run is already pure Python")
def test_comm_suites_pass_on_pure_python() -> None:
    env = {**os.environ, "ASYNCIOCOMM_PURE_PYTHON": "1"}
    check = subprocess.run(
        [sys.executable, "-c", "import asynciocomm.speedups as s; assert not s.COMPILED"],
        env=env, cwd=ROOT, timeout=60,
    )
    assert check.returncode == 0
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "tests/test_conformance.py", "tests/test_serialization.py"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " passed" in run.stdout

"""distributed's own test harness over the takeover: the scenarios in
``tests/harness`` (written with ``gen_cluster`` and ``gen_test``, whose checks
fail a test that leaks a thread, a process, an instance or a file descriptor)
run in a fresh pytest process, once with the stock comm and once with
asynciocomm serving ``tcp://`` and ``tls://`` on each event loop, where they must
all pass, as on stock.

Each run is a subprocess because distributed's harness reads the event loop
from the configuration taken at import, and the takeover must be in place
before the first comm is made.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent
#: The runs: (comm serving tcp:// and tls://, event loop). Stock once, as the
#: oracle that the scenarios themselves are right.
RUNS = [("stock", "asyncio"), ("takeover", "asyncio"), ("takeover", "uvloop")]
#: Seconds one run may take (about 40 s each on 2 cores).
RUN_TIMEOUT = 600


def run_scenarios(comm: str, loop: str, out: Path) -> dict[str, str]:
    """Every scenario's outcome (``passed``, ``failed``, ``error``, ``skipped``)."""
    env = dict(os.environ, ASYNCIOCOMM_HARNESS=comm, DASK_DISTRIBUTED__ADMIN__EVENT_LOOP=loop)
    if comm == "takeover":
        for node in ("SCHEDULER", "WORKER", "NANNY", "CLIENT"):
            env[f"DASK_DISTRIBUTED__{node}__PRELOAD"] = '["asynciocomm.preload"]'
    report = out / f"{comm}-{loop}.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-o", "python_files=scenarios_*.py", f"--junitxml={report}",
         str(HERE / "harness")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcomes[name] = next((k for k in ("failure", "error", "skipped") if k in kinds),
                              "passed")
    if any(v != "passed" for v in outcomes.values()):
        print(proc.stdout[-20000:])
    return outcomes


@pytest.mark.slow
def test_distributeds_harness_passes_with_the_takeover_as_with_stock(tmp_path: Path) -> None:
    results = {run: run_scenarios(*run, tmp_path) for run in RUNS}
    stock = results[RUNS[0]]
    assert stock and all(v == "passed" for v in stock.values()), stock
    for run, outcomes in results.items():
        assert outcomes == stock, (run, {k: v for k, v in outcomes.items() if v != "passed"})

"""Evidence for 0010: LockedComm, _LockedCommPool and freeze_batched_send on any comm.

Runs the tests that 0010 adds (``distributed/tests/test_utils_test_locked_comm.py``)
against a distributed tree, on every comm at hand and on both event loops:

- distributed's own ``tcp``, ``tls``, ``inproc``, ``ws`` and ``wss``;
- asynciocomm's ``asyncio`` and ``asyncio+tls``;
- ``tcp`` and ``tls`` taken over by asynciocomm (``asynciocomm.install()``).

TLS comms use ``Security.temporary()``. Each loop runs in its own subprocess, with
``DASK_DISTRIBUTED__ADMIN__EVENT_LOOP`` set, and each test is called through its
``gen_test`` wrapper, as pytest would call it. For each failure it prints where it
was raised: on the pristine tree, the ``assert isinstance(comm, TCP)`` of
``LockedComm``.

Run it with the venv that has asynciocomm installed, once per tree:

    python patches/evidence/0010-locked-comm-matrix.py TREE TESTFILE

where TESTFILE is the test module from the patched tree (the pristine tree has
none).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from types import ModuleType

#: (row name, scheme, served by asynciocomm's takeover)
VARIANTS = [
    ("tcp", "tcp", False),
    ("tls", "tls", False),
    ("inproc", "inproc", False),
    ("ws", "ws", False),
    ("wss", "wss", False),
    ("asyncio", "asyncio", False),
    ("asyncio+tls", "asyncio+tls", False),
    ("tcp, takeover", "tcp", True),
    ("tls, takeover", "tls", True),
]
TESTS = [
    "test_locked_comm_forwards_the_comm_api",
    "test_locked_comm_intercepts_write_and_read",
    "test_freeze_batched_send_any_comm",
    "test_locked_comm_pool_any_comm",
    "test_freeze_batched_send_holds_back_a_worker",
]
LOOPS = ["asyncio", "uvloop"]


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("locked_comm_tests", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _where(exc: BaseException) -> str:
    """The innermost frame of distributed or of the tests that raised ``exc``"""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__)
        if "/distributed/" in f.filename or f.filename.endswith("_locked_comm.py")
    ]
    if not frames:
        return ""
    f = frames[-1]
    return f" at {Path(f.filename).name}:{f.lineno} `{f.line}`"


def child(testfile: str) -> dict:
    """Run every test on every variant, on the loop that the environment selects"""
    import asyncio

    import distributed
    from distributed.comm import connect
    from distributed.utils_test import gen_test

    # Before distributed.utils_test: gen_test resets dask's config to what it was
    # when utils_test was imported, and would drop asynciocomm's defaults
    import asynciocomm

    mod = _load(testfile)

    @gen_test()
    async def probe(protocol: str) -> list[str]:
        """The loop this runs on, and the comm class that serves ``protocol``"""
        async with mod.EchoListener(protocol) as e:
            comm = await connect(
                e.listener.contact_address,
                **e.security.get_connection_args("client"),
            )
            await comm.close()
        loop = type(asyncio.get_running_loop())
        return [f"{loop.__module__}.{loop.__qualname__}",
                f"{type(comm).__module__}.{type(comm).__qualname__}"]

    out: dict = {"distributed": distributed.__file__, "rows": {}}
    for name, scheme, takeover in VARIANTS:
        if takeover:
            asynciocomm.install()
        try:
            loop, comm_class = probe(scheme)
            row = {"loop": loop, "comm": comm_class, "tests": {}}
            for test in TESTS:
                try:
                    getattr(mod, test)(protocol=scheme)
                    row["tests"][test] = "ok"
                except BaseException as e:  # noqa: BLE001 - reported
                    row["tests"][test] = f"{type(e).__name__}{_where(e)}"
        finally:
            if takeover:
                asynciocomm.uninstall()
        out["rows"][name] = row
    return out


def main(tree: str, testfile: str) -> None:
    for loop in LOOPS:
        env = dict(os.environ, PYTHONPATH=tree, DASK_DISTRIBUTED__ADMIN__EVENT_LOOP=loop)
        proc = subprocess.run(
            [sys.executable, __file__, "--child", testfile],
            env=env, capture_output=True, text=True, timeout=900,
        )
        lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
        if not lines:
            sys.exit(f"the {loop} run crashed (rc={proc.returncode}):\n{proc.stderr[-4000:]}")
        res = json.loads(lines[-1][len("RESULT "):])
        print(f"== loop {loop}, distributed from {res['distributed']}")
        passed = total = 0
        for name, row in res["rows"].items():
            print(f"  {name:14} {row['comm']} on {row['loop']}")
            for test, got in row["tests"].items():
                total += 1
                passed += got == "ok"
                print(f"    {test:46} {got}")
        print(f"  {passed} of {total} passed\n")


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print("RESULT " + json.dumps(child(sys.argv[2])), flush=True)
    else:
        main(*sys.argv[1:3])

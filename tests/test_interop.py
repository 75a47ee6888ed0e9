"""Wire compatibility with the stock Tornado tcp comm, each side in its own process.

The stock side (tests/helpers_stock_peer.py) runs in a subprocess that never
imports asynciocomm; this process takes ``tcp://`` over with
``asynciocomm.install()``. Both use the event loop of the test (loop_env).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest
from distributed import Scheduler, Worker
from distributed.comm import connect, listen

import asynciocomm
from tests.conftest import loop_env
from tests.helpers_stock_peer import messages, same
from tests.variants import echo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WAIT = 120  # generous: a subprocess imports numpy and distributed on a busy machine


@pytest.fixture
def takeover():
    asynciocomm.install()
    try:
        yield
    finally:
        asynciocomm.uninstall()


async def _spawn(loop_name: str | None, *args: str) -> asyncio.subprocess.Process:
    env = loop_env(loop_name)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.helpers_stock_peer", *args,
        cwd=ROOT, env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _finish(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
        await asyncio.wait_for(proc.wait(), WAIT)


async def _result(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    out, err = await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode == 0, err.decode()[-5000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_stock_client_against_takeover_listener(takeover, loop_name) -> None:
    listener = listen("tcp://127.0.0.1:0", echo)
    assert type(listener).__module__ == "asynciocomm.listener"
    await listener.start()
    try:
        proc = await _spawn(loop_name, "client", listener.contact_address)
        try:
            result = await _result(proc)
        finally:
            await _finish(proc)
    finally:
        listener.stop()
    assert result == {
        "exchanged": len(messages()),
        "comm": "distributed.comm.tcp",
        "loop": loop_name,
    }


async def test_takeover_client_against_stock_listener(takeover, loop_name) -> None:
    proc = await _spawn(loop_name, "server")
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = await asyncio.wait_for(proc.stdout.readline(), WAIT)
        assert line, (await proc.stderr.read()).decode()[-5000:]  # type: ignore[union-attr]
        info = json.loads(line)
        assert info["comm"] == "distributed.comm.tcp"
        assert info["loop"] == loop_name
        comm = await connect(info["address"], timeout=WAIT)
        assert type(comm).__module__ == "asynciocomm.comm"
        try:
            for i, msg in enumerate(messages()):
                await comm.write(msg)
                got = await asyncio.wait_for(comm.read(), WAIT)
                assert same(msg, got), f"message {i} differs"
        finally:
            await comm.close()
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), WAIT)
        assert proc.returncode == 0, (await proc.stderr.read()).decode()[-5000:]  # type: ignore[union-attr]
    finally:
        await _finish(proc)


@pytest.mark.slow
async def test_stock_client_process_against_takeover_scheduler(takeover, loop_name) -> None:
    async with Scheduler(host="127.0.0.1", port=0, dashboard_address=":0") as s:
        assert s.address.startswith("tcp://")
        assert type(s.listeners[0]).__module__ == "asynciocomm.listener"
        async with Worker(s.address, nthreads=2):
            proc = await _spawn(loop_name, "cluster-client", s.address)
            try:
                result = await _result(proc)
            finally:
                await _finish(proc)
    assert result == {
        "total": 2 * 1000 * 1000,
        "big_sum": sum(range(3_000_000)),
        "scheduler_comm": "asynciocomm.backend",
        "worker_comms": ["asynciocomm.backend"],
        "comm": "distributed.comm.tcp",
    }

"""install()/uninstall(), and the preload module on the CLI and through config."""

from __future__ import annotations

import json
import subprocess
import sys

import dask
import pytest
from distributed import Client
from distributed.comm import listen
from distributed.comm.registry import backends

import asynciocomm
from asynciocomm.backend import TakeoverBackend
from tests.helpers_proc import ROOT, dask_env, dask_processes, logs, start_scheduler

WAIT = 60


def _module_of_tcp() -> str:
    import distributed

    return type(distributed.comm.registry.backends["tcp"]).__module__


def _listener_module(dask_scheduler) -> list[str]:
    return [type(listener).__module__ for listener in dask_scheduler.listeners]


def test_install_uninstall_idempotent_and_restore_stock_backends() -> None:
    stock = {k: backends[k] for k in ("tcp", "tls")}
    assert not asynciocomm.installed()
    try:
        asynciocomm.install()
        first = {k: backends[k] for k in ("tcp", "tls")}
        asynciocomm.install()
        assert {k: backends[k] for k in ("tcp", "tls")} == first  # same objects
        assert asynciocomm.installed()
        assert isinstance(backends["tcp"], TakeoverBackend) and not backends["tcp"].encrypted
        assert isinstance(backends["tls"], TakeoverBackend) and backends["tls"].encrypted
        listener = listen("tcp://127.0.0.1:0", lambda comm: None)
        assert type(listener).__module__ == "asynciocomm.listener"
        assert listener.prefix == "tcp://"
    finally:
        asynciocomm.uninstall()
        asynciocomm.uninstall()
    assert not asynciocomm.installed()
    for k in ("tcp", "tls"):
        assert backends[k] is stock[k]
    assert type(listen("tcp://127.0.0.1:0", lambda comm: None)).__module__ == (
        "distributed.comm.tcp"
    )


def test_uninstall_without_install_changes_nothing() -> None:
    before = dict(backends)
    asynciocomm.uninstall()
    assert dict(backends) == before


async def test_takeover_comms_use_tcp_addresses() -> None:
    from distributed.comm import connect

    from tests.variants import echo

    asynciocomm.install()
    try:
        listener = listen("tcp://127.0.0.1:0", echo)
        await listener.start()
        try:
            comm = await connect(listener.contact_address, timeout=WAIT)
            assert type(comm).__module__ == "asynciocomm.comm"
            assert comm.local_address.startswith("tcp://127.0.0.1:")
            assert comm.peer_address == listener.contact_address
            await comm.write({"x": 1})
            assert await comm.read() == {"x": 1}
            await comm.close()
        finally:
            listener.stop()
    finally:
        asynciocomm.uninstall()


@pytest.mark.slow
@pytest.mark.parametrize("how, loop", [("cli", "asyncio"), ("config", "uvloop")])
def test_preload_makes_scheduler_use_asynciocomm(how, loop, tmp_path) -> None:
    """``--preload asynciocomm.preload`` (or the preload setting, from the
    environment) makes a ``dask scheduler`` serve tcp:// with asynciocomm; a client
    process with the client preload setting uses it too. This process stays stock."""
    if how == "cli":
        args, env = ["--preload", "asynciocomm.preload"], dask_env(loop)
    else:
        args = []
        env = dask_env(loop, DASK_DISTRIBUTED__SCHEDULER__PRELOAD='["asynciocomm.preload"]')
    with dask_processes() as procs:
        address = start_scheduler(procs, tmp_path, loop, *args, env=env)
        assert address.startswith("tcp://")
        try:
            with dask.config.set({"distributed.admin.event-loop": loop}):
                with Client(address, timeout=WAIT) as c:
                    assert c.run_on_scheduler(_module_of_tcp) == "asynciocomm.backend"
                    assert c.run_on_scheduler(_listener_module) == ["asynciocomm.listener"]
                    assert type(c.scheduler_comm.comm).__module__ == "distributed.comm.tcp"
            # A client process opting in through the client preload setting.
            code = (
                "import json, distributed\n"
                f"c = distributed.Client({address!r}, timeout={WAIT})\n"
                "print(json.dumps([type(distributed.comm.registry.backends['tcp']).__module__,"
                " type(c.scheduler_comm.comm).__module__]))\n"
                "c.close()\n"
            )
            out = subprocess.run(
                [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                timeout=2 * WAIT,
                env=dask_env(loop, DASK_DISTRIBUTED__CLIENT__PRELOAD='["asynciocomm.preload"]'),
            )  # fmt: skip
            assert out.returncode == 0, out.stderr[-5000:]
            assert json.loads(out.stdout.strip().splitlines()[-1]) == [
                "asynciocomm.backend",
                "asynciocomm.comm",
            ]
        except BaseException:
            print(logs(procs))
            raise

"""A listener or a comm left open when its event loop shuts down.

distributed's own tests turn warnings into errors. On uvloop a loop handle
still open at ``loop.close()`` is warned about first, and with the warning an
error that handle is never closed and ``close()`` never returns. The stock
comm survives it; so must every variant, on both loops. Each case runs in a
subprocess, as distributed's runners run a test (``asyncio_run`` with the
configured loop), with ``-W error::ResourceWarning``, so that a hang is a
timeout of that process, not of the test session.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from typing import Any

import pytest
from distributed.comm import connect, listen

from asynciocomm import lifetime
from tests.certs import Certs
from tests.conftest import LOOPS, loop_env
from tests.helpers_proc import ROOT
from tests.peers.loops import loop_factory
from tests.variants import VARIANTS, Variant, variant_params

#: Seconds the subprocess gets: imports and one connection, on a loaded 2-core box.
RUN_TIMEOUT = 120

SCRIPT = r"""
import asyncio, json, sys
from distributed.comm import connect, listen
from distributed.compatibility import asyncio_run
from distributed.config import get_loop_factory
from tests.certs import Certs
from tests.variants import VARIANTS

spec = json.loads(sys.argv[1])
variant = next(v for v in VARIANTS if v.name == spec["variant"])
certs = Certs(**spec["certs"]) if spec["certs"] else None
kept = []

async def handler(comm):
    kept.append(comm)
    await comm.read()

async def main():
    with variant.active():
        listener = listen(f"{variant.scheme}://127.0.0.1:0", handler,
                          **variant.listen_args(certs))
        await listener.start()
        kept.append(listener)
        if spec["what"] == "comm":
            comm = await connect(listener.contact_address, **variant.connect_args(certs))
            await comm.write({"op": "ping"})
            kept.append(comm)
    print("left open", flush=True)

asyncio_run(main(), loop_factory=get_loop_factory())
print("loop closed", flush=True)
"""


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("what", ["listener", "comm"])
@pytest.mark.parametrize("variant", variant_params(VARIANTS))
def test_the_loop_closes_with_things_left_open(variant: Variant, what: str, certs: Certs,
                                               loop: str) -> None:
    spec = {"variant": variant.name, "what": what,
            "certs": vars(certs) if variant.tls else None}
    try:
        done = subprocess.run(
            [sys.executable, "-W", "error::ResourceWarning", "-c", SCRIPT, json.dumps(spec)],
            cwd=ROOT, env=loop_env(loop), capture_output=True, text=True,
            timeout=RUN_TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"loop.close() did not return: {e.stdout!r} {e.stderr!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["left", "open", "loop", "closed"], done.stdout


async def test_shutdown_closes_what_is_open_and_nothing_before(loop_name: str) -> None:
    """The guard closes at shutdown_asyncgens() only; closed comms drop it."""
    lst = listen("asyncio://127.0.0.1:0", lambda comm: None)
    await lst.start()
    comm = await connect(lst.contact_address)
    protocol: Any = comm._protocol  # type: ignore[attr-defined]
    guard = protocol._loop_guard
    assert guard is not None and guard is lst._loop_guard  # type: ignore[attr-defined]
    assert not comm.closed()
    await comm.close()
    assert protocol._loop_guard is None
    lst.stop()
    assert lst._loop_guard is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", LOOPS)
def test_shutdown_asyncgens_aborts_the_connections(name: str) -> None:
    """On the loop a test runner closes, the listener stops and every
    connection is aborted at shutdown_asyncgens(); nothing is left for close()."""
    loop = loop_factory(name)()
    accepted: list[Any] = []

    async def main() -> tuple[Any, Any]:
        lst = listen("asyncio://127.0.0.1:0", accepted.append)
        await lst.start()
        return lst, await connect(lst.contact_address)

    try:
        lst, comm = loop.run_until_complete(main())
        assert not comm.closed()
        loop.run_until_complete(loop.shutdown_asyncgens())
        assert comm._protocol.is_closed  # type: ignore[attr-defined]
        with pytest.raises(ValueError):
            lst.listen_address  # stopped
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()


async def test_the_guard_makes_no_cycle(loop_name: str) -> None:
    class Thing:
        closed = False

        def close_at_loop_shutdown(self) -> None:
            self.closed = True

    # Collect what earlier tests left until nothing is left: the finalizers of
    # what one collection frees can leave cycles of their own for the next
    # (after tests/test_cluster.py on 3.12: 20264, then 334, then 0 objects),
    # which would be counted below as this test's.
    for _ in range(10):
        if not gc.collect():
            break
    gc.disable()
    try:
        thing: Any = Thing()
        thing.guard = lifetime.track(thing)
        other: Any = Thing()
        other.guard = lifetime.track(other)
        assert other.guard is thing.guard
        del thing, other
        await asyncio.sleep(0)  # the dropped guard is closed in a task
        await asyncio.sleep(0)
        assert gc.collect() == 0
    finally:
        gc.enable()

"""How configuration reaches the transport (tests/test_config.py covers the YAML
defaults, the schema and the rejected combinations)."""

from __future__ import annotations

import json
import subprocess
import sys

import dask
import pytest

from asynciocomm import config
from tests.helpers_proc import ROOT, dask_env


def test_max_message_auto_is_the_detected_memory_limit() -> None:
    from distributed.system import MEMORY_LIMIT

    assert dask.config.get("distributed.comm.asyncio.max-message") == "auto"
    assert config.load_settings().max_message == int(MEMORY_LIMIT)
    with dask.config.set({"distributed.comm.asyncio.max-message": "3GiB"}):
        assert config.load_settings().max_message == 3 * 2**30


def test_settings_follow_distributed_timeouts_and_shard() -> None:
    with dask.config.set(
        {
            "distributed.comm.timeouts.connect": "7s",
            "distributed.comm.timeouts.tcp": "2 minutes",
            "distributed.comm.shard": "8MiB",
        }
    ):
        s = config.load_settings()
    assert (s.connect_timeout, s.tcp_timeout, s.shard) == (7, 120, 8 * 2**20)


def test_tls_handshake_gets_the_connect_timeout_and_shutdown_the_tcp_one() -> None:
    """The TLS shutdown, which close() does not wait for, is
    bounded as the kernel bounds the stock comm's unsent bytes: timeouts.tcp."""
    import asyncio

    from asynciocomm.sockets.tlsargs import tls_timeouts

    with dask.config.set(
        {"distributed.comm.timeouts.connect": "7s", "distributed.comm.timeouts.tcp": "45s"}
    ):
        settings = config.load_settings()
    loop = asyncio.new_event_loop()
    try:
        assert tls_timeouts(loop, settings) == {
            "ssl_handshake_timeout": 7, "ssl_shutdown_timeout": 45
        }
    finally:
        loop.close()


@pytest.mark.parametrize(
    "override",
    [
        {"distributed.comm.asyncio.max-message": 0},
        {"distributed.comm.asyncio.direct-read": 0},
        {"distributed.comm.asyncio.write-low-water": -1},
    ],
)
def test_more_invalid_values_are_rejected(override: dict) -> None:
    with dask.config.set(override), pytest.raises(ValueError):
        config.load_settings()


def test_invalid_settings_fail_at_listen_and_connect() -> None:
    """A bad configuration fails when a listener or connector is made, not later on
    the hot path."""
    from distributed.comm import listen

    with dask.config.set({"distributed.comm.asyncio.direct-read": "1MiB"}):
        with pytest.raises(ValueError, match="direct-read"):
            listen("asyncio://127.0.0.1:0", lambda comm: None)


def test_environment_variables_reach_the_settings() -> None:
    code = (
        "import json\n"
        "from asynciocomm.config import load_settings\n"
        "s = load_settings()\n"
        "print(json.dumps([s.read_pause, s.max_frames, s.write_high_water]))\n"
    )
    env = dask_env(
        None,
        DASK_DISTRIBUTED__COMM__ASYNCIO__READ_PAUSE="5MiB",
        DASK_DISTRIBUTED__COMM__ASYNCIO__MAX_FRAMES="77",
        DASK_DISTRIBUTED__COMM__ASYNCIO__WRITE_HIGH_WATER="2MiB",
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [5 * 2**20, 77, 2 * 2**20]

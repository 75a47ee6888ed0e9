"""distributed.comm.asyncio.*: the YAML defaults, the schema and the rejected
combinations, then how the settings reach the transport."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import dask
import pytest
import yaml

from asynciocomm import config
from tests.helpers_proc import ROOT, dask_env


def _leaves(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_defaults_are_loaded_into_dask_config() -> None:
    for key, value in _leaves(config.DEFAULTS).items():
        assert dask.config.get(key) == value, key


def test_every_default_has_a_schema_entry_with_description() -> None:
    with open(config.SCHEMA_FILE) as f:
        schema = yaml.safe_load(f)
    node = schema["properties"]["distributed"]["properties"]["comm"]["properties"]["asyncio"]
    keys = set(config.DEFAULTS["distributed"]["comm"]["asyncio"])
    assert keys == set(node["properties"])
    for key in keys:
        assert node["properties"][key]["description"].strip(), key


def test_every_default_states_its_reason() -> None:
    with open(config.DEFAULTS_FILE) as f:
        lines = f.read().splitlines()
    for key in config.DEFAULTS["distributed"]["comm"]["asyncio"]:
        i = next(n for n, line in enumerate(lines) if line.strip().startswith(f"{key}:"))
        assert lines[i - 1].strip().startswith("#"), f"{key} has no comment above it"


def test_settings_parse_sizes_and_accept_env_style_names() -> None:
    with dask.config.set({"distributed.comm.asyncio.read_pause": "3MiB"}):
        assert config.load_settings().read_pause == 3 * 2**20
    s = config.load_settings()
    assert s.direct_read <= s.read_buffer // 2
    assert s.max_message > 0 and s.max_frames > 0


@pytest.mark.parametrize(
    "override",
    [
        {"distributed.comm.asyncio.direct-read": "200KiB"},
        {"distributed.comm.asyncio.write-low-water": "2MiB"},
        {"distributed.comm.asyncio.max-frames": 0},
    ],
)
def test_invalid_combinations_are_rejected(override: dict) -> None:
    with dask.config.set(override), pytest.raises(ValueError):
        config.load_settings()


def test_settings_survive_distributeds_test_helpers_config_reset() -> None:
    """distributed's gen_test resets dask's config to a copy taken when
    distributed.utils_test was imported; asynciocomm, loaded later through its
    entry point, must still find its settings (found with patches/0010). In a
    fresh interpreter, so that utils_test is imported first."""
    code = textwrap.dedent(
        """
        import sys
        from distributed.comm import connect, listen
        from distributed.utils_test import gen_test
        assert "asynciocomm" not in sys.modules

        @gen_test()
        async def roundtrip():
            async with listen("asyncio://127.0.0.1", lambda comm: None) as listener:
                comm = await connect(listener.contact_address)
                await comm.close()

        roundtrip()
        roundtrip()
        print("ok")
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


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
    loop = asyncio.new_event_loop()  # asyncio's own: no ssl_shutdown_timeout before 3.11
    try:
        expected = {"ssl_handshake_timeout": 7, "ssl_shutdown_timeout": 45}
        if sys.version_info < (3, 11):
            del expected["ssl_shutdown_timeout"]
        assert tls_timeouts(loop, settings) == expected
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

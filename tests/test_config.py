"""distributed.comm.asyncio.* defaults, schema and validation."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import dask
import pytest
import yaml

from asynciocomm import config


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

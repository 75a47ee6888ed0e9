"""Configuration of asynciocomm, under ``distributed.comm.asyncio.*``.

The defaults live in ``asynciocomm.yaml`` beside this module and are merged into
dask's configuration with :func:`dask.config.update_defaults` when this module is
imported. :func:`load_settings` turns the current configuration into a frozen
:class:`Settings` object that one listener or connector hands to its comms, so the
hot path never consults ``dask.config``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import dask
import yaml
from dask.utils import parse_bytes, parse_timedelta

_HERE = os.path.dirname(__file__)
DEFAULTS_FILE = os.path.join(_HERE, "asynciocomm.yaml")
SCHEMA_FILE = os.path.join(_HERE, "asynciocomm-schema.yaml")


with open(DEFAULTS_FILE) as _f:
    DEFAULTS: dict = yaml.safe_load(_f)

dask.config.update_defaults(DEFAULTS)
#: The packaged defaults of ``distributed.comm.asyncio.*``, by key.
_PACKAGED: dict[str, Any] = DEFAULTS["distributed"]["comm"]["asyncio"]


@dataclass(frozen=True)
class Settings:
    """A snapshot of ``distributed.comm.asyncio.*`` plus the timeouts a comm needs."""

    read_buffer: int
    direct_read: int
    coalesce: int
    write_high_water: int
    write_low_water: int
    read_pause: int
    buffer_pool: int
    buffer_pool_min_size: int
    buffer_pool_idle: float
    max_frames: int
    max_message: int
    connect_timeout: float
    tcp_timeout: int
    shard: int


def _bytes(value: str | int) -> int:
    return parse_bytes(value) if isinstance(value, str) else int(value)


def max_frames(value: str | int, max_message: int) -> int:
    """``max-frames``; "auto": as many as a message within ``max-message`` can
    have (its header holds an 8-byte length per frame), so that no message
    distributed can send within that bound is refused for its frame count."""
    return max_message // 8 if value == "auto" else int(value)


def load_settings() -> Settings:
    """Read and validate the current configuration."""
    def get(key: str) -> Any:
        # dask.config.get treats "read-pause" and "read_pause" alike (environment
        # variables produce the latter); the raw dict does not. The packaged
        # default answers when the key is missing: distributed's test helpers
        # (gen_test, gen_cluster) reset dask's config to a copy taken before
        # this package was imported, which drops our defaults.
        return dask.config.get(
            f"distributed.comm.asyncio.{key}", default=_PACKAGED[key]
        )

    max_message = get("max-message")
    if max_message == "auto":
        from distributed.system import MEMORY_LIMIT

        max_message = int(MEMORY_LIMIT)
    settings = Settings(
        read_buffer=_bytes(get("read-buffer")),
        direct_read=_bytes(get("direct-read")),
        coalesce=_bytes(get("coalesce")),
        write_high_water=_bytes(get("write-high-water")),
        write_low_water=_bytes(get("write-low-water")),
        read_pause=_bytes(get("read-pause")),
        buffer_pool=_bytes(get("buffer-pool")),
        buffer_pool_min_size=_bytes(get("buffer-pool-min-size")),
        buffer_pool_idle=parse_timedelta(get("buffer-pool-idle"), default="seconds"),
        max_frames=max_frames(get("max-frames"), _bytes(max_message)),
        max_message=_bytes(max_message),
        connect_timeout=parse_timedelta(
            dask.config.get("distributed.comm.timeouts.connect"), default="seconds"
        ),
        tcp_timeout=int(
            parse_timedelta(
                dask.config.get("distributed.comm.timeouts.tcp"), default="seconds"
            )
        ),
        shard=_bytes(dask.config.get("distributed.comm.shard")),
    )
    if not 0 < settings.direct_read <= settings.read_buffer // 2:
        raise ValueError(
            "distributed.comm.asyncio.direct-read must be positive and at most half "
            f"of read-buffer ({settings.read_buffer} bytes); got {settings.direct_read}"
        )
    if not 0 <= settings.write_low_water <= settings.write_high_water:
        raise ValueError(
            "distributed.comm.asyncio.write-low-water must be between 0 and "
            "write-high-water"
        )
    if settings.buffer_pool < 0 or settings.buffer_pool_min_size < 1:
        raise ValueError(
            "distributed.comm.asyncio.buffer-pool must be >= 0 and "
            "buffer-pool-min-size >= 1"
        )
    if settings.buffer_pool_idle <= 0:
        raise ValueError("distributed.comm.asyncio.buffer-pool-idle must be positive")
    if settings.max_frames < 1 or settings.max_message < 1:
        raise ValueError("distributed.comm.asyncio.max-frames/max-message must be >= 1")
    return settings

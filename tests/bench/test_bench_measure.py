"""The measurement loops: warm-up before timing, counts that add up."""

from __future__ import annotations

import asyncio
from typing import Any

from bench import measure

MiB = 1024 * 1024


def test_warmup_messages_cover_the_byte_budget() -> None:
    assert measure.warmup_messages(128 * MiB, 8) == 2
    assert measure.warmup_messages(16 * MiB, 120) == 16
    assert measure.warmup_messages(1024, 100) == 100  # capped by the count
    assert measure.warmup_messages(1024 * MiB, 5) == 1  # at least one


class CountingDriver:
    """Records what one_way sends; the server side is a counter."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.count = 0

    def message(self, size: int) -> Any:
        return size

    async def send(self, conn: Any, msg: Any) -> None:
        self.log.append("send")
        self.count += 1

    async def sync(self, conn: Any) -> int:
        self.log.append("sync")
        n, self.count = self.count, 0
        return n


def test_one_way_warms_up_then_times_only_the_rest() -> None:
    driver = CountingDriver()
    sent, secs, cpu = asyncio.run(
        measure.one_way(driver, None, 128 * MiB, 8, 10.0, lambda: 0.0))
    assert driver.log == ["send"] * 2 + ["sync"] + ["send"] * 8 + ["sync"]
    assert sent == 8 and secs > 0 and cpu == 0.0

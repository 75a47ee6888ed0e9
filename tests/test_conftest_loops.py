"""The harness itself: async tests really run on the loop they are named after."""

from __future__ import annotations

import dask

from tests.conftest import running_loop_name


async def test_loop_matches_setting(loop_name: str) -> None:
    assert running_loop_name() == loop_name
    assert dask.config.get("distributed.admin.event-loop") == loop_name

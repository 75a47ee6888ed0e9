"""Fixtures of the scale bench tests."""

from __future__ import annotations

import pytest

from asynciocomm_bench.scale import netns


@pytest.fixture
def namespaces() -> None:
    """Skip unless network namespaces can be made here (root, ``ip``)."""
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces cannot be made: {reason}")


def ours(prefix: str) -> list[str]:
    """The namespaces that still exist with ``prefix``."""
    return [n for n in netns.list_namespaces() if n.startswith(prefix)]

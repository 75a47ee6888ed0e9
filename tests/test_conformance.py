"""Every conformance check against every transport variant, on both loops."""

from __future__ import annotations

import pytest

from tests import conformance

CHECKS = [pytest.param(fn, id=name.removeprefix("check_")) for name, fn in conformance.checks()]


@pytest.mark.parametrize("check", CHECKS)
async def test_conformance(check, variant, certs) -> None:
    await check(variant, certs)

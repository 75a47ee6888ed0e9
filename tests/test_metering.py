"""asynciocomm.metering: the meter is skipped only when nothing could receive it."""

from __future__ import annotations

from typing import Any

import pytest
from distributed.metrics import context_meter

from asynciocomm import metering


@context_meter.meter("step")
def _step(x: int, *, y: int = 0) -> int:
    return x + y


@pytest.fixture
def digested(monkeypatch) -> list[tuple[Any, float, str]]:
    """Every metric handed to context_meter, listened to or not."""
    seen: list[tuple[Any, float, str]] = []
    original = context_meter.digest_metric

    def digest(label: Any, value: float, unit: str) -> None:
        seen.append((label, value, unit))
        original(label, value, unit)

    monkeypatch.setattr(context_meter, "digest_metric", digest)
    return seen


def test_distributed_keeps_callbacks_where_expected() -> None:
    # The pinned distributed must support the fast path, or it silently is off.
    assert metering.SUPPORTED
    assert not metering.listening()


def test_no_meter_without_a_callback(digested) -> None:
    step = metering.unobserved(_step)
    assert step(1, y=2) == 3
    assert digested == []
    assert _step(1, y=2) == 3  # the metered step digests even with nobody listening
    assert [d[0] for d in digested] == ["step"]


def test_metered_while_a_callback_listens(digested) -> None:
    step = metering.unobserved(_step)
    got: list[tuple[Any, str]] = []
    with context_meter.add_callback(lambda label, value, unit: got.append((label, unit))):
        assert metering.listening()
        assert step(2) == 2
    assert got == [("step", "seconds")]
    assert step(3) == 3  # the callback is gone again
    assert got == [("step", "seconds")]


def test_an_enclosing_meter_still_subtracts_the_step() -> None:
    """An outer meter listens for inner metrics (to subtract their time): the
    step must be metered inside it, as distributed's own code would be."""
    step = metering.unobserved(_step)
    got: list[Any] = []
    with context_meter.add_callback(lambda label, value, unit: got.append(label)):
        with context_meter.clear_callbacks():
            with context_meter.meter("outer"):
                pass
            assert not metering.listening()
        with context_meter.meter("outer"):
            step(1)
    assert got == ["step", "outer"]  # the first outer one, cleared, reached nobody


def test_unwrapped_functions_are_returned_as_they_are() -> None:
    def plain(x: int) -> int:
        return x

    assert metering.unobserved(plain) is plain

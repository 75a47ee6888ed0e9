"""asynciocomm.serialization.metering: the meter is skipped only when nothing could receive it."""

from __future__ import annotations

from typing import Any

import pytest
from distributed.metrics import context_meter

from asynciocomm.serialization import metering


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


async def _cluster_transfer_keys(protocol: str, threshold: Any) -> tuple[set, set]:
    from distributed import Client, LocalCluster

    from tests.conformance.serialization import offload_threshold, transfer_metric_keys

    with offload_threshold(threshold):
        async with LocalCluster(protocol=protocol, n_workers=2, threads_per_worker=1,
                                processes=False, dashboard_address=":0",
                                asynchronous=True) as cluster:
            async with Client(cluster, asynchronous=True) as client:
                a, b = cluster.workers.values()
                return await transfer_metric_keys(client, a, b)


@pytest.mark.parametrize("threshold", ["default", 1])
async def test_transfer_metric_keys_are_stocks(threshold) -> None:
    """Every metric key a get-data and a gather-dep record, on the stock tcp comm
    and on asynciocomm, at distributed's threshold and with it lowered at run
    time (then stock offloads every read and records ``offload``)."""
    import distributed.comm.utils

    if threshold == "default":
        threshold = distributed.comm.utils.OFFLOAD_THRESHOLD
    theirs = await _cluster_transfer_keys("tcp", threshold)
    ours = await _cluster_transfer_keys("asyncio", threshold)
    assert ours == theirs
    offloaded = {k[0] for keys in ours for k in keys if k[1] == "offload"}
    assert offloaded == ({"get-data", "gather-dep"} if threshold == 1 else set())

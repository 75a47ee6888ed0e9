"""The differential harness in CI (``tests.differential``; the glue to
the test variants is tests/differential/): sequences of operations on a connected
pair run on the stock comm (the oracle) and on asynciocomm, plain and TLS, on both
loops; their traces must agree.

Fixed seed (``derandomize``) and bounded example counts: every CI run tries the
same sequences, few enough to keep CI within its time (``asynciocomm-bench
differential`` runs hundreds). A failure prints the sequence as Python to replay with
``tests.differential.runner.run_sequence``, the differences and the
traces.
"""

from __future__ import annotations

import pytest
from distributed.comm.core import CommClosedError
from hypothesis import HealthCheck, example, given, settings

from asynciocomm.protocol import FramedProtocol
from tests.certs import Certs
from tests.differential.check import BY_NAME, PAIRS, check, run_variant
from tests.differential.known import KNOWN, OPEN_BUGS
from tests.differential.ops import Close, Read, Sequence, Write
from tests.differential.strategies import sequences

#: The known cases hang where the bug is: a shorter bound (a legitimate step
#: of theirs takes milliseconds).
KNOWN_WAIT = 2.0


def _settings(examples: int) -> settings:
    return settings(derandomize=True, database=None, max_examples=examples,
                    deadline=None, suppress_health_check=list(HealthCheck),
                    print_blob=False)


@pytest.mark.parametrize("pair", ["plain", "tls"])
@_settings(10)
@given(seq=sequences())
async def test_stock_is_deterministic(pair: str, seq: Sequence, certs: Certs) -> None:
    """Stock run twice gives the same trace, with nothing left out: the traces
    and the model's rules do not depend on timing."""
    ref = PAIRS[pair][0]
    await check((ref, ref), seq, certs, frozenset())


@pytest.mark.parametrize("pair", ["plain", "tls"])
@_settings(15)
@given(seq=sequences(open_bugs=OPEN_BUGS))
# Stock says closed() True here with a message unread (compare.SAFER).
@example(seq=Sequence("plain", (Write("A"), Write("A"), Read("B"), Close("A"))))
async def test_differential(pair: str, seq: Sequence, certs: Certs) -> None:
    """asynciocomm and its takeover behave as stock on generated sequences
    (leaving out what runs into the open items of ``known.OPEN_BUGS``)."""
    await check(PAIRS[pair], seq, certs, OPEN_BUGS)


def _known_params() -> list[object]:
    out = []
    for case in KNOWN:
        for pair in case.pairs:
            marks = ([pytest.mark.xfail(strict=True, reason=f"{case.name}: {case.title}")]
                     if case.name in OPEN_BUGS else [])
            out.append(pytest.param(case.seq, case.name, pair, marks=marks,
                                    id=f"{case.name}-{case.seq.setup}-on-{pair}"))
    return out


@pytest.mark.parametrize(("seq", "name", "pair"), _known_params())
async def test_known_divergences(seq: Sequence, name: str, pair: str, certs: Certs) -> None:
    """Each known divergence's minimal sequence, checked strictly for it (the
    other open ones stay masked, so each case shows one bug only)."""
    await check(PAIRS[pair][:2], seq, certs, OPEN_BUGS - {name}, KNOWN_WAIT)


#: Two writes, a read, A closed, the rest drained: B's last read ends in the
#: error raised by ``FramedProtocol.read_nowait``.
TRIVIAL = Sequence("plain", (Write("A"), Write("A"), Read("B"), Close("A")))


async def test_the_cycle_check_passes_a_trivial_sequence() -> None:
    """The harness itself leaves nothing of asynciocomm in reference cycles
    (it keeps no exception, nor a task holding one: see ``_Run.bounded``)."""
    trace = await run_variant(BY_NAME["asyncio"], TRIVIAL, None, OPEN_BUGS)
    assert "CommClosedError" in trace.received["B"], trace.lines()
    assert trace.cycles == [], trace.lines()


async def test_the_cycle_check_finds_an_exception_kept_by_the_frame_that_raised_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a ``read_nowait`` that keeps its exception in a local
    of the frame that raises it (exception -> traceback -> frame -> exception,
    the frame holding the protocol) is reported."""
    original = FramedProtocol.read_nowait

    def read_nowait(self: FramedProtocol) -> object:
        try:
            return original(self)
        except CommClosedError as exc:
            kept = exc  # noqa: F841 (the deliberate cycle)
            raise

    monkeypatch.setattr(FramedProtocol, "read_nowait", read_nowait)
    trace = await run_variant(BY_NAME["asyncio"], TRIVIAL, None, OPEN_BUGS)
    assert "FramedProtocol" in trace.cycles, trace.lines()

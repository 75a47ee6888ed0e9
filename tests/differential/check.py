"""The differential harness's glue to the test variants (``tests.variants``) and
the test PKI, for tests/test_differential.py; the long runs
(``python -m tests.differential``) build their pairs in ``command``."""

from __future__ import annotations

from tests.certs import Certs
from tests.differential.compare import differences, report
from tests.differential.ops import Sequence
from tests.differential.runner import Trace, run_sequence
from tests.variants import VARIANTS, Variant

BY_NAME = {v.name: v for v in VARIANTS}
#: The reference first, then the variants compared with it.
PAIRS = {"plain": ("stock-tcp", "asyncio", "takeover-tcp"),
         "tls": ("stock-tls", "asyncio+tls", "takeover-tls")}
#: Bound of every single wait in a run (a hang is an outcome, never a block).
WAIT = 5.0


async def run_variant(variant: Variant, seq: Sequence, certs: Certs,
                      open_bugs: frozenset[str], wait: float = WAIT) -> Trace:
    """``seq`` on a fresh pair of ``variant`` (its takeover installed meanwhile)."""
    with variant.active():
        return await run_sequence(seq, variant.scheme, variant.listen_args(certs),
                                  variant.connect_args(certs), wait=wait,
                                  open_bugs=open_bugs, gc_check=variant.ours)


async def check(names: tuple[str, ...], seq: Sequence, certs: Certs,
                open_bugs: frozenset[str], wait: float = WAIT) -> None:
    """Run ``seq`` on each variant; every trace must match the first one's, and
    asynciocomm's runs must leave nothing of theirs in reference cycles."""
    traces = {n: await run_variant(BY_NAME[n], seq, certs, open_bugs, wait) for n in names}
    problems = {n: differences(traces[names[0]], traces[n]) for n in names[1:]}
    for n in names[1:]:
        problems[n] += [f"left in reference cycles: {c}" for c in traces[n].cycles]
    assert not any(problems.values()), report(seq, traces, problems)

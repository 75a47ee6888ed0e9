"""The configurations of ``gc``: each comm on each loop, with and without the draft."""

from __future__ import annotations

from asynciocomm_bench.common.options import stock_scheme

#: The label suffix of a configuration run with the draft applied.
DRAFT_TAG = "+0011"


def order_configs(schemes: list[str], loops: list[str], drafts: list[bool]) -> list[
        tuple[str, str, bool]]:
    """(scheme, loop, draft), each stock comm right before the asynciocomm one."""
    ordered = sorted(schemes, key=lambda s: (stock_scheme(s), s != stock_scheme(s)))
    return [(s, lp, d) for lp in loops for d in drafts for s in ordered]


def label(scheme: str, loop: str, draft: bool) -> str:
    """``scheme@loop``, with :data:`DRAFT_TAG` when the draft is applied."""
    return f"{scheme}@{loop}{DRAFT_TAG if draft else ''}"

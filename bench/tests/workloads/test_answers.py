"""Answers: what matches exactly, what within the float tolerance, and frame digests
that do not depend on the order of rows."""

from __future__ import annotations

import pandas as pd

from asynciocomm_bench.workloads.answers import (
    array_answer,
    differences,
    digest_answer,
    frame_digest,
)


def test_integers_match_exactly_and_floats_within_tolerance() -> None:
    assert differences({"n": 3, "sum": 1.0}, {"n": 3, "sum": 1.0 + 1e-9}) == []
    assert differences({"n": 3, "sum": 0.0}, {"n": 3, "sum": 1e-9}) == []
    assert differences({"n": 3, "sum": 1.0}, {"n": 3, "sum": 1.01}) == ["sum: 1.0 != 1.01"]
    assert differences({"n": 3}, {"n": 4}) == ["n: 3 != 4"]
    assert differences({"n": 3}, {"n": 3, "sorted": 1}) == ["sorted: None != 1"]


def test_a_frame_digest_ignores_row_order_but_not_values() -> None:
    df = pd.DataFrame({"a": [1.5, 2.5, 3.5], "b": ["x", "y", "z"]}, index=[10, 20, 30])
    shuffled = df.iloc[[2, 0, 1]]
    changed = df.assign(a=[1.5, 2.5, 3.25])
    parts = [frame_digest(df.iloc[:1]), frame_digest(df.iloc[1:])]
    whole = digest_answer(frame_digest(df))
    assert digest_answer(frame_digest(shuffled)) == whole
    assert digest_answer(pd.concat(parts)) == whole
    assert whole["rows"] == 3
    assert digest_answer(frame_digest(changed)) != whole


def test_array_answer() -> None:
    got = array_answer([[1.0, -2.0], [0.0, 3.0]])
    assert got == {"shape": "2x2", "sum": 2.0, "sumsq": 14.0, "maxabs": 3.0}

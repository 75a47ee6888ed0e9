"""Small fingerprints of a workload's answer, and their comparison.

An answer is a flat mapping of names to numbers. Integers (counts, and the sum
of 64-bit row hashes modulo 2**64) must match exactly. Floats are sums of many
terms: two runs of the same graph add the same partial sums in the same order,
but the reference run (dask's local scheduler, or a task-based method where the
run uses P2P) may group them differently, so floats match within
``REL_TOL``/``ABS_TOL``. A lost, duplicated or corrupted block moves such a sum
by far more than that.
"""

from __future__ import annotations

import math
from typing import Any

Answer = dict[str, Any]

#: Float sums of up to 10**9 terms in another grouping differ by rounding only:
#: about 1e-16 relative per addition, accumulated over a few levels.
REL_TOL = 1e-6
#: For sums whose true value is 0 (an anomaly's mean): noise of rounding.
ABS_TOL = 1e-6

MASK64 = (1 << 64) - 1


def array_answer(values: Any) -> Answer:
    """Shape, sum, sum of squares and largest magnitude of a NumPy array."""
    import numpy as np

    a = np.asarray(values, dtype="f8")
    return {"shape": "x".join(map(str, a.shape)), "sum": float(a.sum()),
            "sumsq": float((a * a).sum()), "maxabs": float(np.abs(a).max()) if a.size else 0.0}


def frame_digest(df: Any) -> Any:
    """One row per partition: its length and the sum (mod 2**64) of its row hashes,
    index included. The sum of row hashes does not depend on the rows' order."""
    import numpy as np
    import pandas as pd

    hashed = pd.util.hash_pandas_object(df, index=True).to_numpy(dtype="u8")
    with np.errstate(over="ignore"):
        total = int(hashed.sum(dtype="u8"))
    return pd.DataFrame({"rows": [len(df)], "hash": [total]}, dtype="u8")


DIGEST_META = {"rows": "u8", "hash": "u8"}


def digest_answer(parts: Any) -> Answer:
    """The answer of a frame from its partitions' digests (a pandas frame)."""
    total = 0
    for h in parts["hash"].tolist():
        total = (total + int(h)) & MASK64
    return {"rows": int(parts["rows"].sum()), "hash": total}


def differences(got: Answer, want: Answer) -> list[str]:
    """What differs between two answers ([] when they match)."""
    out = []
    for key in sorted(set(got) | set(want)):
        a, b = got.get(key), want.get(key)
        if isinstance(a, float) or isinstance(b, float):
            ok = (isinstance(a, (int, float)) and isinstance(b, (int, float))
                  and math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL))
        else:
            ok = a == b
        if not ok:
            out.append(f"{key}: {a!r} != {b!r}")
    return out

"""The self-check's cost, paired: ``import asynciocomm`` and the decision made at
a process's first comm (``asynciocomm.serialization.choice.decided()``), with the check and without it, in
fresh processes, alternating (ABBA), for each interpreter given.

    python bench/results/compatibility_selfcheck_cost.py --pairs 15 PYTHON [PYTHON ...]

Each PYTHON is the interpreter of an environment with asynciocomm installed
(e.g. one per distributed release). In every process distributed is imported
first, untimed (any process that imports asynciocomm has it), then the import
of asynciocomm and the decision are timed (wall and CPU), and the decision
alone (less noisy: the import's own spread is tens of ms): "with" runs the
self-check as it is, "without" replaces ``selfcheck.differences`` by a function
that finds nothing, so the processes differ in the check alone. Printed per interpreter: the
releases, the median of each side, and the median of the paired differences
(with, minus without) with their range; the last line is all of it as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from asynciocomm_bench.common.sweep import alternating

#: One process: import asynciocomm and decide, the self-check kept or replaced,
#: and print the wall and CPU seconds of both.
PROBE = r"""
import json, sys, time
import distributed, dask
skip = sys.argv[1] == "without"
wall, cpu = time.perf_counter(), time.process_time()
import asynciocomm
from asynciocomm.serialization import choice, selfcheck
if skip:
    selfcheck.differences = lambda codec_class: (None, None)
decide_wall, decide_cpu = time.perf_counter(), time.process_time()
choice.decided()
now_wall, now_cpu = time.perf_counter(), time.process_time()
assert choice.FAST.__name__ == "MessageCodec", choice.OFF_BECAUSE
print(json.dumps({"wall": now_wall - wall, "cpu": now_cpu - cpu,
                  "decide_wall": now_wall - decide_wall, "decide_cpu": now_cpu - decide_cpu,
                  "release": selfcheck.release(), "numpy": "numpy" in sys.modules}))
"""


def _run(python: str, side: str) -> dict:
    done = subprocess.run([python, "-c", PROBE, side], capture_output=True, text=True,
                          timeout=120, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _summary(values: list[float]) -> dict:
    return {"median_ms": statistics.median(values) * 1e3, "min_ms": min(values) * 1e3,
            "max_ms": max(values) * 1e3, "n": len(values)}


def measure(python: str, pairs: int) -> dict:
    runs: dict[str, list[dict]] = {"with": [], "without": []}
    for i in range(pairs):
        for side in alternating(("with", "without"), i):
            runs[side].append(_run(python, side))
    out: dict = {"python": python, "release": runs["with"][0]["release"],
                 "numpy_loaded": runs["with"][0]["numpy"], "pairs": pairs}
    for key in ("wall", "cpu", "decide_wall", "decide_cpu"):
        with_, without = ([r[key] for r in runs[s]] for s in ("with", "without"))
        out[key] = {"with": _summary(with_), "without": _summary(without),
                    "difference": _summary([a - b for a, b in zip(with_, without)])}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("python", nargs="+")
    parser.add_argument("--pairs", type=int, default=15)
    args = parser.parse_args()
    results = []
    for python in args.python:
        r = measure(python, args.pairs)
        results.append(r)
        for key in ("wall", "cpu", "decide_wall", "decide_cpu"):
            d = r[key]
            what = "the decision alone" if key.startswith("decide") else "import and decision"
            print(f"{r['release']}: {what}, {key.rpartition('_')[2]}: with the check "
                  f"{d['with']['median_ms']:.1f} ms, without {d['without']['median_ms']:.1f} ms; "
                  f"the check {d['difference']['median_ms']:.1f} ms "
                  f"({d['difference']['min_ms']:.1f} to {d['difference']['max_ms']:.1f}, "
                  f"{r['pairs']} pairs)", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())

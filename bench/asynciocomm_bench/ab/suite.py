"""``ab``: a user's own script, unchanged, under the stock comm and under asynciocomm.

The script runs ``pairs`` times under each comm, the stock comm first in even
pairs and asynciocomm first in odd ones (ABBA). The comm is switched from
outside, through distributed's preload settings in the environment
(``DASK_DISTRIBUTED__{SCHEDULER,WORKER,NANNY,CLIENT}__PRELOAD``): on
asynciocomm's side ``asynciocomm.preload`` comes first, which makes ``tcp://``
and ``tls://`` use asynciocomm in every process that starts a scheduler,
worker, nanny or client, before any of them opens a connection. Both sides also
get :mod:`asynciocomm_bench.ab.witness`, whose records prove, for every such object in
every process, which comm classes it served and held; a run whose records do
not show the expected comm everywhere (or show no scheduler, worker or client)
counts as an error and gives no sample.

Measured: the script's wall time (start to exit of its process), always; the
CPU time of the scheduler's event-loop thread between its setup and its
teardown, where the scheduler runs in a process the script starts (a
``LocalCluster``, or a ``dask scheduler`` it launches with the same
environment) and closes cleanly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from asynciocomm_bench.ab.witness import WITNESS_DIR_ENV
from asynciocomm_bench.common.progress import Bar
from asynciocomm_bench.common.stats import summarize
from asynciocomm_bench.common.sweep import alternating

SIDES = ("stock", "asynciocomm")
ROLES = ("scheduler", "worker", "client")
PRELOAD_ROLES = ("scheduler", "worker", "nanny", "client")
METRICS = {
    "wall_s": {"title": "script: wall time", "unit": "s", "higher_is_better": False,
               "headline": True, "stat": "wall_s"},
    "sched_loop_cpu_s": {"title": "script: scheduler event-loop CPU", "unit": "s",
                         "higher_is_better": False, "headline": True,
                         "stat": "sched_loop_cpu_s"},
    "sched_process_cpu_s": {"title": "script: CPU of the scheduler's process", "unit": "s",
                            "higher_is_better": False, "stat": "sched_process_cpu_s"},
}


@dataclasses.dataclass(frozen=True)
class Options:
    """What an ``ab`` run does."""

    script: str
    args: list[str]
    pairs: int
    python: str
    timeout_s: float
    loop: str | None


def preload_env(side: int) -> dict[str, str]:
    """The preload settings of one side, with the user's own preloads after ours."""
    import dask

    ours = (["asynciocomm.preload"] if side else []) + ["asynciocomm_bench.ab.witness"]
    env: dict[str, str] = {}
    for role in PRELOAD_ROLES:
        theirs = list(dask.config.get(f"distributed.{role}.preload", None) or [])
        env[f"DASK_DISTRIBUTED__{role.upper()}__PRELOAD"] = repr(ours + theirs)
        argv = dask.config.get(f"distributed.{role}.preload-argv", None) or []
        if argv and isinstance(argv[0], (list, tuple)):  # one list per module
            env[f"DASK_DISTRIBUTED__{role.upper()}__PRELOAD_ARGV"] = repr(
                [[] for _ in ours] + [list(a) for a in argv])
    return env


def records(folder: Path) -> list[dict[str, Any]]:
    """The witness records a run left."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def _classes(rec: dict[str, Any]) -> list[str]:
    return [*rec["listeners"], *rec["comms"]]


def problems(recs: list[dict[str, Any]], side: int) -> list[str]:
    """Why a run's records do not prove that it used the side's comm ([] if they do)."""
    out = [f"no {r} witnessed" for r in ROLES if r not in {rec["role"] for rec in recs}]
    for rec in recs:
        who = f"{rec['role']} (pid {rec['pid']})"
        backend = rec["backends"].get("tcp", "")
        if backend.startswith("asynciocomm.") != bool(side):
            out.append(f"{who}: tcp:// is served by {backend}")
        for cls in _classes(rec):
            if cls.startswith("asynciocomm.") != bool(side):
                out.append(f"{who} used {cls}")
            elif not side and not cls.startswith("distributed.comm.tcp."):
                out.append(f"{who} used {cls}, which the takeover does not replace")
    return out


def scheduler_cpu(recs: list[dict[str, Any]]) -> dict[str, float]:
    """The scheduler's CPU between its setup and teardown (one scheduler only)."""
    scheds = [r for r in recs if r["role"] == "scheduler"]
    if len(scheds) != 1 or "teardown" not in scheds[0]:
        return {}
    s = scheds[0]
    return {"sched_loop_cpu_s": s["teardown"]["loop_cpu_s"] - s["setup"]["loop_cpu_s"],
            "sched_process_cpu_s": s["teardown"]["process_cpu_s"] - s["setup"]["process_cpu_s"]}


def _loop_name(recs: list[dict[str, Any]], fallback: str) -> str:
    loops = {r["loop"] for r in recs if r["role"] == "scheduler" and r.get("loop")}
    if not loops:
        return fallback
    return "uvloop" if all(lp.startswith("uvloop.") for lp in loops) else "asyncio"


def _tls(recs: list[dict[str, Any]]) -> bool:
    return any(c.rsplit(".", 1)[-1].startswith("TLS") for r in recs for c in _classes(r))


def run_once(opts: Options, side: int, folder: Path, log: Path) -> dict[str, Any]:
    """One run of the script; its wall time, exit status and witness records."""
    folder.mkdir(parents=True)
    env = {**os.environ, **preload_env(side), WITNESS_DIR_ENV: str(folder)}
    if opts.loop:
        env["DASK_DISTRIBUTED__ADMIN__EVENT_LOOP"] = opts.loop
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        try:
            code = subprocess.run([opts.python, opts.script, *opts.args], env=env,
                                  stdout=out, stderr=subprocess.STDOUT,
                                  timeout=opts.timeout_s).returncode
        except subprocess.TimeoutExpired:
            code = None
        wall = time.perf_counter() - t0
    return {"wall_s": wall, "exit": code, "records": records(folder)}


def _config_loop(opts: Options) -> str:
    import dask

    loop = opts.loop or dask.config.get("distributed.admin.event-loop", "asyncio")
    return "uvloop" if loop == "uvloop" else "asyncio"


def run_ab(opts: Options, logdir: Path, *, quiet: bool = False) -> dict[str, Any]:
    """Run the pairs and return the section."""
    samples: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    started = time.monotonic()
    logdir.mkdir(parents=True, exist_ok=True)
    loop, tls = _config_loop(opts), False
    with tempfile.TemporaryDirectory(prefix="asynciocomm-bench-ab-") as tmp, \
            Bar(2 * opts.pairs, "ab", quiet) as bar:
        for pair in range(opts.pairs):
            for side in alternating((0, 1), pair):
                bar.describe(f"pair {pair + 1}/{opts.pairs}: {SIDES[side]}")
                log = logdir / f"pair{pair}-{SIDES[side]}.log"
                got = run_once(opts, side, Path(tmp) / f"{pair}-{side}", log)
                bar.advance()
                recs = got.pop("records")
                wrong = problems(recs, side)
                if got["exit"] != 0:
                    wrong.insert(0, f"the script exited with {got['exit']} (see {log.name})")
                loop = _loop_name(recs, loop)
                tls = tls or (side == 0 and _tls(recs))
                runs.append({"pair": pair, "side": SIDES[side], **got,
                             "roles": sorted({r["role"] for r in recs}),
                             "processes": len({r["pid"] for r in recs}),
                             "classes": sorted({c for r in recs for c in _classes(r)}),
                             "problems": wrong, **scheduler_cpu(recs)})
                if wrong:
                    errors.append({"rep": pair, "config": SIDES[side],
                                   "error": "; ".join(wrong[:5])})
                    bar.log(f"ab {SIDES[side]} pair {pair + 1}: {wrong[0]}", error=True)
    labels = (f"{'tls' if tls else 'tcp'}@{loop}", f"{'asyncio+tls' if tls else 'asyncio'}@{loop}")
    for run in runs:
        if run["problems"]:
            continue
        label = labels[SIDES.index(run["side"])]
        samples += [{"rep": run["pair"], "config": label, "metric": m, "value": float(run[m])}
                    for m in METRICS if run.get(m) is not None]
    peers = {labels[1]: labels[0]}
    return {
        "configs": [{"label": lab, "scheme": lab.split("@")[0], "loop": loop}
                    for lab in labels],
        "reference": labels[0], "same_loop_refs": peers, "metrics": METRICS,
        "samples": samples, "summary": summarize(samples, METRICS, labels[0], peers),
        "script": opts.script, "args": opts.args, "python": opts.python,
        "runs": runs, "reps_done": opts.pairs, "truncated": False, "errors": errors,
        "seconds": time.monotonic() - started,
    }

"""``workloads``: real user workloads, the stock comm against asynciocomm, in pairs.

For every event loop and security (plain: ``tcp`` against ``asyncio``; TLS:
``tls`` against ``asyncio+tls``) and every pair, one driver process
(:mod:`asynciocomm_bench.workloads.driver`) runs each workload on both comms, one after the
other, on fresh clusters: the stock comm first in even pairs and asynciocomm
first in odd ones, shifted by one from each workload to the next (ABBA), so that
a drift of the machine's load favours neither. The pairs are the outer loop, so
that a time budget stops the run between whole pairs.

Each run's answer must equal the workload's right answer (computed once, before
the pairs) and the answers of every run of that workload on that loop and
security, whichever the comm; a run whose answer differs counts as an error and
gives no sample.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.progress import Bar
from asynciocomm_bench.common.stats import summarize
from asynciocomm_bench.common.sweep import Sweep, alternating
from asynciocomm_bench.common.tlsfiles import make_tls_files
from asynciocomm_bench.workloads import plans
from asynciocomm_bench.workloads.answers import Answer, differences
from asynciocomm_bench.workloads.workload import Workload

#: The statistics of every workload: (metric suffix, title, unit).
STATS = (("wall_s", "wall time", "s"),
         ("loop_cpu_s", "scheduler event-loop CPU", "s"))


@dataclasses.dataclass(frozen=True)
class Options:
    """What a ``workloads`` run measures."""

    loops: list[str]
    tls: list[bool]
    pairs: int
    scale: float
    workers: int
    threads: int
    timeout_s: float
    budget_s: float
    #: After the pairs, one more run of each workload and comm under py-spy.
    profile: bool = False


def group_schemes(tls: bool) -> tuple[str, str]:
    """The stock scheme and asynciocomm's, plain or TLS."""
    return ("tls", "asyncio+tls") if tls else ("tcp", "asyncio")


def metrics_for(wls: list[Workload]) -> dict[str, dict[str, Any]]:
    """Two metrics per workload, both lower-is-better, plotted as ratios; the wall
    times are the headline's rows."""
    return {f"{w.name}_{stat}": {"title": f"{w.name}: {title}", "unit": unit,
                                 "higher_is_better": False, "plot": False,
                                 "headline": stat == "wall_s", "stat": stat,
                                 "workload": w.name}
            for stat, title, unit in STATS for w in wls}


def order(pair: int, index: int) -> tuple[int, int]:
    """Which comm of a pair runs first: 0 (stock) in even pairs, shifted by one
    per workload."""
    first, second = alternating((0, 1), pair + index)
    return first, second


def pair_plan(wls: list[Workload], pair: int, loop: str, tls: bool,
              opts: Options) -> list[dict[str, Any]]:
    """The runs of one pair on one loop and security, in ABBA order."""
    schemes = group_schemes(tls)
    runs = []
    for i, wl in enumerate(wls):
        for side in order(pair, i):
            runs.append({"index": len(runs), "workload": wl.name, "scheme": schemes[side],
                         "loop": loop, "pair": pair, "first": side == order(pair, i)[0]})
    return runs


def _base_plan(opts: Options, loop: str, tls_files: Any) -> dict[str, Any]:
    return {"loop": loop, "workers": opts.workers, "threads": opts.threads,
            "scale": opts.scale, "timeout_s": opts.timeout_s,
            "tls": dataclasses.asdict(tls_files) if tls_files else None}


def expected_answers(wls: list[Workload], opts: Options, workdir: Path,
                     bar: Bar) -> tuple[dict[str, Answer], list[dict[str, Any]]]:
    """Each workload's right answer, computed once in a driver process."""
    plan = {**_base_plan(opts, opts.loops[0], None), "mode": "expected",
            "timeout_s": max(opts.timeout_s, 300.0),
            "runs": [{"index": i, "workload": w.name} for i, w in enumerate(wls)]}
    bar.describe("right answers")
    rows = plans.run_plan(plan, workdir / "expected.log")
    errors = [{"rep": -1, "config": "expected", "workload": r["workload"],
               "error": r["error"]} for r in rows if "error" in r]
    return {r["workload"]: r["answer"] for r in rows if "answer" in r}, errors


def _label(row: dict[str, Any]) -> str:
    return f"{row['scheme']}@{row['loop']}"


class Checker:
    """Right answers, and the same answer across the runs of one loop and security."""

    def __init__(self, want: dict[str, Answer]) -> None:
        self.want = want
        self.first: dict[tuple[str, str, bool], tuple[str, Answer]] = {}
        self.counts: dict[str, dict[str, int]] = {}

    def check(self, row: dict[str, Any], tls: bool) -> str | None:
        """The problem with a run's answer, or None."""
        name = row["workload"]
        count = self.counts.setdefault(name, {"runs": 0, "right": 0, "same": 0})
        count["runs"] += 1
        if name not in self.want:
            return "no right answer to check against"
        wrong = differences(row["answer"], self.want[name])
        if wrong:
            return "wrong answer: " + "; ".join(wrong[:3])
        count["right"] += 1
        key = (name, row["loop"], tls)
        seen = self.first.setdefault(key, (_label(row), row["answer"]))
        other = differences(row["answer"], seen[1])
        if other:
            return f"answer differs from {seen[0]}'s: " + "; ".join(other[:3])
        count["same"] += 1
        return None


def profile_runs(wls: list[Workload], opts: Options, groups: list[tuple[str, bool]],
                 tls_files: Any, outdir: Path, workdir: Path, bar: Bar) -> list[dict[str, Any]]:
    """One run of each workload and comm under py-spy, and the scheduler's
    event-loop thread ("IO loop") per category (:mod:`asynciocomm_bench.profile.speedscope`)."""
    from asynciocomm_bench.profile import speedscope

    out = []
    for loop, tls in groups:
        bar.describe(f"profiles {loop}{' TLS' if tls else ''}")
        runs = []
        for wl in wls:
            for scheme in group_schemes(tls):
                name = f"speedscope-{wl.name}-{scheme.replace('+', '_')}_{loop}.json"
                runs.append({"index": len(runs), "workload": wl.name, "scheme": scheme,
                             "loop": loop, "profile": str(outdir / name)})
        plan = {**_base_plan(opts, loop, tls_files), "runs": runs}
        for row in plans.run_plan(plan, workdir / f"profile-{loop}-{tls}.log"):
            entry = {"workload": row["workload"], "config": _label(row),
                     "speedscope": Path(row["profile"]).name}
            if "error" in row:
                out.append({**entry, "error": row["error"]})
                continue
            analysis = speedscope.analyze(speedscope.load(row["profile"]), thread="IO loop")
            out.append({**entry, "wall_s": row["wall_s"], "loop_cpu_s": row["loop_cpu_s"],
                        **{k: analysis[k] for k in ("samples", "thread", "shares",
                                                     "busy_shares", "comm_parts")}})
    return out


def run_workloads(wls: list[Workload], opts: Options, *, quiet: bool = False,
                  logdir: Path | None = None, outdir: Path | None = None) -> dict[str, Any]:
    """Run the suite and return its JSON section."""
    groups = [(loop, tls) for tls in opts.tls for loop in opts.loops]
    configs = [(s, loop) for loop, tls in groups for s in group_schemes(tls)]
    labels = [f"{s}@{lp}" for s, lp in configs]
    samples: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    sweep = Sweep("workloads", opts.pairs, opts.budget_s, unit="pairs")
    loop_classes: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="asynciocomm-bench-workloads-") as tmp:
        workdir = logdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        tls_files = make_tls_files(Path(tmp) / "tls") if any(opts.tls) else None
        with Bar(opts.pairs * len(groups) * 2 * len(wls) + 1, "workloads", quiet) as bar:
            want, errors = expected_answers(wls, opts, workdir, bar)
            bar.advance()
            checker = Checker(want)
            for pair in sweep.repetitions(bar.log):
                for loop, tls in groups:
                    bar.describe(f"pair {pair + 1}/{opts.pairs} {loop}"
                                 f"{' TLS' if tls else ''}")
                    plan = {**_base_plan(opts, loop, tls_files),
                            "runs": pair_plan(wls, pair, loop, tls, opts)}
                    rows = plans.run_plan(plan, workdir / f"pair{pair}-{loop}-"
                                          f"{'tls' if tls else 'plain'}.log",
                                          on_result=lambda r: bar.advance())
                    for row in rows:
                        problem = row.get("error") or checker.check(row, tls)
                        runs.append({k: v for k, v in row.items() if k != "traceback"})
                        if problem:
                            # The traceback (its cause chain too) stays with the
                            # error: a run that fails once may not fail again.
                            errors.append({"rep": pair, "config": _label(row),
                                           "workload": row["workload"],
                                           "error": f"{row['workload']}: {problem}",
                                           **({"traceback": row["traceback"]}
                                              if "traceback" in row else {})})
                            bar.log(f"workloads {_label(row)} {row['workload']}: "
                                    f"{problem[:300]}", error=True)
                            continue
                        loop_classes[_label(row)] = {
                            "scheduler": row["evidence"]["scheduler"],
                            "workers": ", ".join(row["evidence"]["workers"]),
                            "client comm": row["evidence"]["client_comm"]}
                        samples += [{"rep": pair, "config": _label(row),
                                     "metric": f"{row['workload']}_{stat}",
                                     "value": float(row[stat])} for stat, _, _ in STATS]
            profiles = (profile_runs(wls, opts, groups, tls_files, outdir or workdir,
                                     workdir, bar) if opts.profile else [])
    metrics = metrics_for(wls)
    peers = {f"{a}@{lp}": f"{s}@{lp}" for lp, tls in groups
             for s, a in [group_schemes(tls)]}
    return {
        "configs": [{"label": lab, "scheme": s, "loop": lp}
                    for (s, lp), lab in zip(configs, labels)],
        "reference": labels[0],
        "same_loop_refs": peers,
        "metrics": metrics,
        "samples": samples,
        "summary": summarize(samples, metrics, labels[0], peers),
        "loop_classes": loop_classes,
        "catalog": [{"name": w.name, "family": w.family, "what": w.what,
                       "params": {k: str(v) for k, v in w.size(opts.scale).items()}}
                      for w in wls],
        "expected": want,
        "checks": checker.counts,
        "runs": runs,
        "profiles": profiles,
        "options": dataclasses.asdict(opts),
        "reps_done": sweep.reps_done,
        "truncated": sweep.truncated,
        "errors": errors,
        "seconds": sweep.seconds(),
    }

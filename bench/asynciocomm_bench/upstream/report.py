"""The ``upstream`` report as markdown: the runs, the classes per module and loop,
every difference with both outcomes and its reruns, and what failed on both."""

from __future__ import annotations

from typing import Any

from asynciocomm_bench.upstream.compare import CLASSES, Verdict, counts
from asynciocomm_bench.upstream.runs import Run


def _cell(text: str, limit: int = 160) -> str:
    one_line = " ".join(text.split())
    if len(one_line) > limit:
        one_line = one_line[:limit - 1] + "…"
    return one_line.replace("|", "\\|") or "–"


def _run_row(run: Run, label: str) -> str:
    kinds = [o.kind for o in run.outcomes.values()]
    stopped = [f"`{t}` {o.outcome}" for t, o in run.outcomes.items()
               if o.kind in ("hung", "crashed")]
    state = (f"{len(run.commands)} processes: " + "; ".join(stopped) if stopped
             else f"exit {', '.join(str(c) for c in run.returncodes)}")
    if run.timed_out:
        state += f"; the run's time was up ({kinds.count('missing')} tests not run)"
    return (f"| {label} | {run.comm} | {run.loop} | {len(kinds)} | {kinds.count('passed')} "
            f"| {kinds.count('failed')} | {kinds.count('skipped')} | {run.seconds:.0f} "
            f"| {state} |")


def _rerun_text(v: Verdict) -> str:
    if not v.reruns:
        return "not rerun"
    parts = [f"{comm} {', '.join(kinds)}" for comm, kinds in sorted(v.reruns.items())]
    verdict = "consistent" if v.consistent else "not repeated every time (flaky)"
    return f"{'; '.join(parts)}: {verdict}"


def render(meta: dict[str, Any], runs: list[Run], reruns: list[Run],
           found: list[Verdict]) -> str:
    """The whole report."""
    lines = ["# distributed's own tests: the takeover against the stock comm", "",
             f"distributed {meta['distributed']} (installed), asynciocomm "
             f"{meta['asynciocomm']}, Python {meta['python']}; started {meta['started']} "
             f"UTC; {meta['seconds']:.0f} s in all.", "",
             f"- source tree: `{meta['source']}`",
             f"- modules: {', '.join(f'`{m}`' for m in meta['modules'])}",
             f"- loops: {', '.join(meta['loops'])}; `--runslow` "
             f"{'on' if meta['runslow'] else 'off'}; per-test timeout "
             f"{meta['test_timeout']:g} s, per-run timeout {meta['run_timeout']:g} s",
             f"- command: `{meta['command']}`", "",
             "## Runs", "",
             "| run | comm | loop | tests | passed | failed | skipped | s | end |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [_run_row(r, "main") for r in runs]
    lines += [_run_row(r, "rerun") for r in reruns]
    lines += ["", "## Tests per module and loop", "",
              "| module | loop | " + " | ".join(CLASSES) + " |",
              "|---|---|" + "---|" * len(CLASSES)]
    for (module, loop), row in sorted(counts(found).items()):
        lines.append(f"| `{module}` | {loop} | "
                     + " | ".join(str(row[c]) for c in CLASSES) + " |")
    differs = [v for v in found if v.klass == "differs"]
    lines += ["", f"## Differences ({len(differs)})", ""]
    if not differs:
        lines.append("None: every test has the same outcome with the takeover as with "
                     "the stock comm, on every loop.")
    for v in differs:
        lines += [f"- `{v.test}` on {v.loop}: stock **{v.stock.outcome}**"
                  f" ({_cell(v.stock.message)}), takeover **{v.takeover.outcome}**"
                  f" ({_cell(v.takeover.message)}); reruns: {_rerun_text(v)}"]
    failed: dict[str, list[Verdict]] = {}
    for v in found:
        if v.klass == "failed on both":
            failed.setdefault(v.test, []).append(v)
    lines += ["", f"## Failed on both ({len(failed)})", "",
              "A stock failure is not the transport's: the stock comm's message is shown.",
              ""]
    if failed:
        lines += ["| test | loops | stock's message |", "|---|---|---|"]
        for test, vs in failed.items():
            lines.append(f"| `{test}` | {', '.join(v.loop for v in vs)} "
                         f"| {_cell(vs[0].stock.message)} |")
    return "\n".join(lines) + "\n"

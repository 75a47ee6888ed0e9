"""What the report says about an ``ab`` section beyond its tables."""

from __future__ import annotations

import shlex
from typing import Any


def details(sec: dict[str, Any]) -> str:
    """The script, how the comm was switched, and each run's proof."""
    cmd = shlex.join([sec.get("script", "?"), *sec.get("args", [])])
    lines = [
        f"Script: `{cmd}`, {sec.get('reps_done', '?')} pair(s) in ABBA order. The comm "
        "was switched from outside, through distributed's preload settings "
        "(`asynciocomm.preload` on asynciocomm's side); the witness preload recorded, "
        "in every process, the comm classes each scheduler, worker, nanny and client "
        "served and held. Wall time is the script's, start to exit; the scheduler's "
        "CPU is that of its event-loop thread between its start and its close.",
        "",
        "| pair | comm | wall, s | exit | processes | roles witnessed | comm classes | proof |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in sec.get("runs", []):
        proof = "; ".join(run["problems"][:3]) or "every process as expected"
        lines.append(f"| {run['pair']} | {run['side']} | {run['wall_s']:.2f} | {run['exit']} "
                     f"| {run['processes']} | {', '.join(run['roles'])} "
                     f"| {', '.join(f'`{c}`' for c in run['classes'])} | {proof} |")
    return "\n".join(lines)

"""``python -m tests.differential``: the differential harness, run for longer than CI runs it.

For each event loop and each variant family (plain: stock ``tcp`` against
``asyncio`` and ``takeover-tcp``; TLS: stock ``tls`` against ``asyncio+tls`` and
``takeover-tls``), hypothesis generates sequences of operations from ``--seed``,
runs each on stock and on the chosen variants, and stops at the first divergence
(shrunk to a minimal sequence unless ``--no-shrink``), after ``--examples``, or
when the ``--budget`` is spent. ``tcp`` or ``tls`` alone in ``--schemes`` runs
stock against itself (the determinism check).

Prints a summary and each counterexample; writes ``differential.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Variant name -> (scheme, TLS, takeover). References: stock-tcp, stock-tls.
VARIANTS = {"asyncio": ("asyncio", False, False), "takeover-tcp": ("tcp", False, True),
            "asyncio+tls": ("asyncio+tls", True, False), "takeover-tls": ("tls", True, True),
            "tcp": ("tcp", False, False), "tls": ("tls", True, False)}
REFERENCE = {False: "tcp", True: "tls"}


class UsageError(Exception):
    """A mistake on the command line: printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    """The command line's options."""
    p = argparse.ArgumentParser(prog="python -m tests.differential",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--schemes", default="asyncio,takeover-tcp,asyncio+tls,takeover-tls",
                   help=f"comma-separated variants compared with stock ({', '.join(VARIANTS)})")
    p.add_argument("--loops", default="asyncio,uvloop", help="asyncio, uvloop")
    p.add_argument("--examples", type=int, default=500,
                   help="generated sequences per family and loop, at most")
    p.add_argument("--seed", type=int, default=0, help="hypothesis seed")
    p.add_argument("--budget", type=float, default=600.0,
                   help="seconds for the whole run (no example starts after it)")
    p.add_argument("--max-steps", type=int, default=14, help="operations per sequence")
    p.add_argument("--wait", type=float, default=5.0, help="bound of every wait (s)")
    p.add_argument("--all-bugs", action="store_true",
                   help="also generate what runs into the known divergences not fixed "
                        "yet (known.OPEN_BUGS); by default those areas are left out")
    p.add_argument("--no-shrink", action="store_true", help="report the first example as found")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default ./bench-results/differential-<stamp>)")
    return p


@dataclass
class Outcome:
    """One family on one loop: how many sequences ran, and the counterexample."""

    loop: str
    names: tuple[str, ...]
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    counterexample: str | None = None
    ops: dict[str, int] = field(default_factory=dict)


class Divergence(AssertionError):
    """A sequence whose traces differ (hypothesis shrinks it, then re-raises)."""


def _families(schemes: list[str]) -> list[tuple[str, ...]]:
    unknown = [s for s in schemes if s not in VARIANTS]
    if unknown:
        raise UsageError(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    out = []
    for tls in (False, True):
        ref = REFERENCE[tls]
        names = [s for s in schemes if VARIANTS[s][1] == tls]
        if names:
            out.append((ref, *names))
    return out


async def _traces(seq: Any, names: tuple[str, ...], security: Any, wait: float,
                  open_bugs: frozenset[str]) -> dict[str, Any]:
    import asynciocomm
    from tests.differential.runner import run_sequence

    out = {}
    for i, name in enumerate(names):
        scheme, tls, takeover = VARIANTS[name]
        largs = security.get_listen_args("scheduler") if tls else {}
        cargs = security.get_connection_args("client") if tls else {}
        if takeover:
            asynciocomm.install()
        try:
            out[f"{name}#{i}"] = await run_sequence(seq, scheme, largs, cargs, wait=wait,
                                                    open_bugs=open_bugs,
                                                    gc_check=name not in REFERENCE.values())
        finally:
            if takeover:
                asynciocomm.uninstall()
    return out


def search(names: tuple[str, ...], loop: str, args: argparse.Namespace, security: Any,
           deadline: float) -> Outcome:
    """Generate and compare until a divergence, ``--examples`` or the deadline."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    from tests.differential.compare import differences, report
    from tests.differential.known import OPEN_BUGS
    from tests.differential.ops import op_text
    from tests.differential.strategies import sequences
    from tests.peers.loops import run_on_loop

    open_bugs = frozenset() if args.all_bugs else OPEN_BUGS
    outcome = Outcome(loop, names)
    phases = [Phase.generate] + ([] if args.no_shrink else [Phase.shrink])
    started = time.monotonic()

    @settings(max_examples=args.examples, database=None, deadline=None, phases=phases,
              suppress_health_check=list(HealthCheck), print_blob=False, derandomize=False)
    @seed(args.seed)
    @given(seq=sequences(max_steps=args.max_steps, open_bugs=open_bugs))
    def prop(seq: Any) -> None:
        if time.monotonic() > deadline:
            return
        outcome.examples += 1
        outcome.steps += len(seq.steps)
        for op in seq.steps:
            name = op_text(op).split("(")[0].split(".")[1]
            outcome.ops[name] = outcome.ops.get(name, 0) + 1
        traces = run_on_loop(lambda: _traces(seq, names, security, args.wait, open_bugs), loop)
        keys = list(traces)
        problems = {k: differences(traces[keys[0]], traces[k])
                    + [f"left in reference cycles: {c}" for c in traces[k].cycles]
                    for k in keys[1:]}
        if any(problems.values()):
            raise Divergence(report(seq, traces, problems))

    try:
        prop()
    except Divergence as exc:
        outcome.counterexample = str(exc)
    outcome.seconds = time.monotonic() - started
    return outcome


def render(outcomes: list[Outcome], args: argparse.Namespace) -> str:
    """The summary as markdown: one row per family and loop, then counterexamples."""
    lines = [f"# differential: seed {args.seed}, up to {args.examples} examples of "
             f"up to {args.max_steps} steps, budget {args.budget:.0f} s"
             + (", open known divergences included" if args.all_bugs else ""), "",
             "| loop | reference vs variants | examples | steps | s | result |",
             "|---|---|---|---|---|---|"]
    for o in outcomes:
        result = "DIVERGES" if o.counterexample else "no difference"
        lines.append(f"| {o.loop} | {' vs '.join(o.names)} | {o.examples} | {o.steps} "
                     f"| {o.seconds:.1f} | {result} |")
    ops: dict[str, int] = {}
    for o in outcomes:
        for k, v in o.ops.items():
            ops[k] = ops.get(k, 0) + v
    lines += ["", "operations run: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items()))]
    for o in outcomes:
        if o.counterexample:
            lines += ["", f"## counterexample: {o.loop}, {' vs '.join(o.names)}", "",
                      "```", o.counterexample, "```"]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> Path:
    """Run the subcommand; returns the output directory."""
    from tests.certs import make_certs
    from tests.conftest import LOOPS

    families = _families([s.strip() for s in args.schemes.split(",") if s.strip()])
    loops = [lo.strip() for lo in args.loops.split(",") if lo.strip()]
    unknown = [lo for lo in loops if lo not in LOOPS]
    if unknown:
        raise UsageError(f"loop {unknown[0]!r} is not available; choose from {', '.join(LOOPS)}")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or Path("bench-results") / f"differential-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        security = make_certs(tmp).security()
        for loop in loops:
            for names in families:
                o = search(names, loop, args, security, deadline)
                outcomes.append(o)
                state = "DIVERGES" if o.counterexample else "no difference"
                print(f"{loop}: {' vs '.join(names)}: {o.examples} examples, {state}",
                      flush=True)
    text = render(outcomes, args)
    (out / "differential.md").write_text(text)
    print(text)
    print(f"wrote {out / 'differential.md'}")
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status."""
    try:
        run(build_parser().parse_args(argv))
    except UsageError as exc:
        print(f"python -m tests.differential: error: {exc}", file=sys.stderr)
        return 2
    return 0

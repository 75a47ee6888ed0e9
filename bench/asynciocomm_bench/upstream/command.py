"""``asynciocomm-bench upstream``: distributed's own test modules, with the stock
comm and with the takeover, on each event loop, compared test by test.

distributed's tests are not in its sdist or wheel, so this takes a source tree
the user has (a checkout of distributed at the tag of the installed release) and
runs the chosen modules from it against the installed distributed. For each loop
it runs them twice in fresh pytest processes, once with the stock comm and once
with asynciocomm serving ``tcp://`` and ``tls://`` in every process (the test
process through ``asynciocomm_bench.upstream.plugin``, processes the tests start through the
preload settings), then runs each test whose outcome differs again on both
comms (``--reruns``). Writes ``upstream.md`` and ``upstream.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import time
from pathlib import Path
from typing import Any

from asynciocomm_bench.upstream import compare, report, runs

#: The modules run by default: distributed's comm, core and batched tests.
DEFAULT_MODULES = ("distributed/comm/tests/test_comms.py", "distributed/tests/test_core.py",
                   "distributed/tests/test_batched.py")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``upstream`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "upstream", help="distributed's own test modules, stock comm against the takeover",
        description=__doc__.split("\n\n")[0])
    p.add_argument("--source", type=Path, required=True,
                   help="distributed source tree (a checkout at the installed release's tag)")
    p.add_argument("--modules", default=",".join(DEFAULT_MODULES),
                   help="comma-separated test modules or node ids, relative to --source")
    p.add_argument("--loops", default="asyncio,uvloop", help="asyncio, uvloop")
    p.add_argument("--runslow", action="store_true", help="also run tests marked slow")
    p.add_argument("--reruns", type=int, default=2,
                   help="runs of each differing test again, on both comms")
    p.add_argument("--test-timeout", type=float, default=120.0,
                   help="seconds one test may take, its setup and teardown included "
                        "(distributed's own pytest-timeout is 300 s, its gen_test and "
                        "gen_cluster stop at 30 s; this bounds what a hang costs)")
    p.add_argument("--run-timeout", type=float, default=1800.0,
                   help="seconds one pytest process may take; then it and every "
                        "process it started are stopped")
    p.add_argument("--pytest-arg", action="append", default=[],
                   help="an extra pytest argument (repeat for more), e.g. -k=tcp")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default ./bench-results/upstream-<stamp>)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def _check(args: argparse.Namespace) -> tuple[Path, list[str], list[str]]:
    from asynciocomm_bench.common.options import BenchError, check_loops

    source = args.source.resolve()
    if not source.is_dir():
        raise BenchError(f"upstream: --source {source} is not a directory")
    targets = [m.strip() for m in args.modules.split(",") if m.strip()]
    missing = [t for t in targets if not (source / t.split("::")[0]).exists()]
    if not targets or missing:
        raise BenchError(f"upstream: not in {source}: {', '.join(missing) or 'no module'}")
    if args.reruns < 0:
        raise BenchError("upstream: --reruns must be 0 or more")
    return source, targets, check_loops(args.loops.split(","))


def command_line(args: argparse.Namespace, targets: list[str], loops: list[str]) -> str:
    """The subcommand's own command line for these arguments (for the record)."""
    argv = ["asynciocomm-bench", "upstream", "--source", str(args.source),
            "--modules", ",".join(targets), "--loops", ",".join(loops),
            "--reruns", str(args.reruns)]
    argv += ["--runslow"] if args.runslow else []
    argv += [f"--pytest-arg={a}" for a in args.pytest_arg]
    return shlex.join(argv)


def run(args: argparse.Namespace) -> Path:
    """Run the subcommand; returns the output directory."""
    from asynciocomm_bench.common.environment import describe

    source, targets, loops = _check(args)
    stamp = datetime.datetime.now(datetime.timezone.utc)
    out: Path = (args.out or Path("bench-results") /
                 f"upstream-{stamp.strftime('%Y%m%d-%H%M%S')}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = (lambda *_: None) if args.quiet else (lambda text: print(text, flush=True))
    opts = {"runslow": args.runslow, "test_timeout": args.test_timeout,
            "run_timeout": args.run_timeout, "extra": list(args.pytest_arg), "log": log}
    started = time.monotonic()
    main: list[runs.Run] = []
    for loop in loops:
        for comm in runs.COMMS:
            main.append(runs.run(comm, loop, source, targets, out, f"{comm}-{loop}", **opts))
    found = compare.verdicts(main)
    again: list[runs.Run] = []
    for loop in loops:
        ids = [v.test for v in found if v.loop == loop and v.klass == "differs"]
        for i in range(args.reruns if ids else 0):
            for comm in runs.COMMS:
                again.append(runs.run(comm, loop, source, ids, out,
                                      f"rerun{i + 1}-{comm}-{loop}", **opts))
    compare.add_reruns(found, again)
    env = describe()
    meta = {"source": str(source), "modules": targets, "loops": loops,
            "runslow": args.runslow, "test_timeout": args.test_timeout,
            "run_timeout": args.run_timeout, "reruns": args.reruns,
            "started": stamp.strftime("%Y-%m-%d %H:%M"),
            "seconds": time.monotonic() - started,
            "command": command_line(args, targets, loops),
            "distributed": env["versions"]["distributed"],
            "asynciocomm": env["versions"]["asynciocomm"], "python": env["python"]}
    text = report.render(meta, main, again, found)
    (out / "upstream.md").write_text(text)
    (out / "upstream.json").write_text(json.dumps(
        {"meta": meta, "environment": env, "runs": [r.to_json() for r in main],
         "reruns": [r.to_json() for r in again],
         "verdicts": [v.to_json() for v in found]}, indent=1))
    if not args.quiet:
        print("\n" + text, end="")
    print(f"wrote {out / 'upstream.md'} and {out / 'upstream.json'}")
    return out

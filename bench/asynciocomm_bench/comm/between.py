"""``between``: one comm measurement, two installs, paired in alternating order.

The other subcommands set schemes against each other within one install. This
one sets two installs of asynciocomm against each other, such as the
environments of two checkouts (before and after a change), on one measurement:
``ping`` (round trips/s), ``stream`` (1 KiB one-way messages/s), ``bulk:SIZE``
(one-way GiB/s) or ``clients:N`` (round trips/s of N concurrent clients).
Each pair runs ``asynciocomm_bench/comm/probe.py`` under both interpreters,
A then B in even pairs and B then A in odd ones (ABBA), so that a drift of the
machine's load favours neither. Reported: B against A, the median of the ratios
paired within each pair (> 1: B is better, for throughput and CPU alike),
their range and number, and "no measurable difference" where the range reaches
1.0, as everywhere in the bench.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.options import BenchError, check_loops, check_schemes, is_tls
from asynciocomm_bench.common.stats import Comparison, cell
from asynciocomm_bench.common.sweep import alternating
from asynciocomm_bench.common.tlsfiles import make_tls_files

PROBE = Path(__file__).with_name("probe.py")
UNITS = {"ping": "round trips/s", "stream": "1 KiB messages/s", "bulk": "GiB/s",
         "clients": "round trips/s"}


def parse_test(text: str) -> tuple[str, int]:
    """``ping``, ``stream``, ``bulk:SIZE`` (dask's sizes: 16MiB) or ``clients:N``
    as (test, size)."""
    from dask.utils import parse_bytes

    name, _, size = text.partition(":")
    if name in ("ping", "stream") and not size:
        return name, 0
    if name == "bulk" and size:
        n = parse_bytes(size)
        if n > 4096:
            return name, n
    if name == "clients" and size.isdigit() and 1 <= int(size) <= 256:
        return name, int(size)
    raise BenchError("between: --test takes ping, stream, bulk:SIZE above 4 KiB or "
                     f"clients:N (1-256), not {text!r}")


def probe(python: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One measurement by ``python`` (a path to an install's interpreter)."""
    try:
        done = subprocess.run([python, str(PROBE), json.dumps(spec)], capture_output=True,
                              text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BenchError(f"between: {python}: {type(exc).__name__}: {exc}") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"between: {python} failed (exit {done.returncode}): {tail}")
    return dict(json.loads(lines[-1]))


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The pairs and B against A on the client's figure, the server's CPU and
    the client's CPU."""

    pairs: list[dict[str, Any]]
    value: Comparison
    server_cpu: Comparison
    client_cpu: Comparison


def compare(python_a: str, python_b: str, spec: dict[str, Any], pairs: int,
            timeout: float, log: Any = print) -> Outcome:
    """``pairs`` pairs of measurements, in ABBA order."""
    rows = []
    for i in range(pairs):
        order = alternating(("a", "b"), i)
        got = {side: probe(python_a if side == "a" else python_b, spec, timeout)
               for side in order}
        rows.append({"pair": i, "order": "".join(order), **got})
        log(f"pair {i + 1}/{pairs} ({' then '.join(s.upper() for s in order)}): "
            + ", ".join(f"{s.upper()} {got[s]['value']:.4g} (CPU per message: client "
                        f"{got[s]['client_cpu_us']:.4g} µs, server "
                        f"{got[s]['server_cpu_us']:.4g} µs)" for s in "ab"))
    value = Comparison(tuple(r["b"]["value"] / r["a"]["value"] for r in rows))
    cpu = Comparison(tuple(r["a"]["server_cpu_us"] / r["b"]["server_cpu_us"] for r in rows))
    client = Comparison(tuple(r["a"]["client_cpu_us"] / r["b"]["client_cpu_us"] for r in rows))
    return Outcome(rows, value, cpu, client)


def run(args: argparse.Namespace) -> Path:
    """The ``between`` subcommand: a table, and ``between.json`` under ``--out``."""
    test, size = parse_test(args.test)
    scheme = check_schemes([args.scheme])[0]
    loop = check_loops([args.loop])[0]
    if args.pairs < 1:
        raise BenchError("between: --pairs must be at least 1")
    spec: dict[str, Any] = {"test": test, "size": size, "loop": loop, "scheme": scheme,
                            "seconds": args.seconds}
    with tempfile.TemporaryDirectory(prefix="asynciocomm-between-tls-") as tmp:
        if is_tls(scheme):
            spec["tls"] = dataclasses.asdict(make_tls_files(tmp))
        got = compare(args.a, args.b, spec, args.pairs, args.seconds * 4 + 120,
                      log=(lambda *_: None) if args.quiet else print)
    unit = UNITS[test]
    table = "\n".join([
        f"| {args.test}, {scheme}@{loop} | B against A |",
        "|---|---|",
        f"| {unit} | {cell(got.value)} |",
        f"| server CPU per message | {cell(got.server_cpu)} |",
        f"| client CPU per message | {cell(got.client_cpu)} |",
    ])
    print(f"A: {args.a}\nB: {args.b}\n\n{table}")
    out: Path = args.out or Path("bench-results") / "between"
    out.mkdir(parents=True, exist_ok=True)
    spec.pop("tls", None)
    (out / "between.json").write_text(json.dumps(
        {"a": args.a, "b": args.b, "spec": spec, "pairs": got.pairs,
         "value_ratios": got.value.ratios, "server_cpu_ratios": got.server_cpu.ratios,
         "client_cpu_ratios": got.client_cpu.ratios},
        indent=1))
    return out


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``between`` on an argparse subparsers object."""
    p = subparsers.add_parser("between", help="one measurement, two installs (ABBA pairs)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("a", help="interpreter of install A (e.g. ../before/.venv/bin/python)")
    p.add_argument("b", help="interpreter of install B")
    p.add_argument("--test", default="ping",
                   help="ping, stream, bulk:SIZE (bulk:16MiB) or clients:N (clients:32)")
    p.add_argument("--scheme", default="asyncio", help="the comm scheme both installs run")
    p.add_argument("--loop", default="asyncio", help="asyncio or uvloop")
    p.add_argument("--pairs", type=int, default=8, help="pairs of measurements")
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per measurement")
    p.add_argument("--out", type=Path, default=None, help="where between.json goes")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p

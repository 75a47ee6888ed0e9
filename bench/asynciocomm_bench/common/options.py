"""Validation of schemes and loops, and the size/time bounds of each mode."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

LOOPS = ("asyncio", "uvloop")
#: The stock comm every run includes, on each of its loops; on this loop (when the
#: run has it) it is the first column of every table. A comm's ratios are taken
#: against the stock comm on its own loop (``stock_peer``).
REFERENCE_SCHEME = "tcp"
REFERENCE_LOOP = "asyncio"


class BenchError(Exception):
    """A user-facing error: printed as one line, without a traceback."""


def check_schemes(schemes: Sequence[str]) -> list[str]:
    """Return the schemes, or raise BenchError naming the first unavailable one."""
    import distributed.comm  # noqa: F401  (fills the tcp/tls/inproc/ws backends)
    from distributed.comm.registry import backends, get_backend

    out: list[str] = []
    for scheme in schemes:
        scheme = scheme.strip()
        if not scheme:
            continue
        try:
            get_backend(scheme)
        except Exception as exc:  # ValueError for unknown, ImportError for broken
            known = sorted(backends)
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise BenchError(
                f"scheme {scheme!r} is not available ({msg}); "
                f"registered now: {', '.join(known)}"
            ) from None
        if scheme not in out:
            out.append(scheme)
    if not out:
        raise BenchError("no scheme given")
    return out


def check_loops(loops: Sequence[str]) -> list[str]:
    """Return the loops, or raise BenchError for an unknown or missing loop."""
    out: list[str] = []
    for loop in loops:
        loop = loop.strip()
        if not loop:
            continue
        if loop not in LOOPS:
            raise BenchError(f"loop {loop!r} is unknown; choose from {', '.join(LOOPS)}")
        if loop == "uvloop":
            try:
                import uvloop  # noqa: F401
            except ImportError:
                raise BenchError("loop 'uvloop' needs the uvloop package") from None
        if loop not in out:
            out.append(loop)
    if not out:
        raise BenchError("no loop given")
    return out


def is_tls(scheme: str) -> bool:
    """True for schemes that need TLS arguments (``tls``, ``wss``, ``*+tls``)."""
    return scheme in ("tls", "wss") or scheme.endswith("+tls")


def stock_scheme(scheme: str) -> str:
    """The stock comm a scheme is set against: ``tls`` for TLS schemes, else ``tcp``."""
    return "tls" if is_tls(scheme) else REFERENCE_SCHEME


def reference_loop(loops: Sequence[str]) -> str:
    """The loop of the first column of a run's tables (tcp on it): the reference
    loop, or the run's first loop when it does not have that one."""
    return REFERENCE_LOOP if REFERENCE_LOOP in loops else loops[0]


def stock_peer(kind: str, scheme: str | None, loop: str | None, tls: bool) -> str | None:
    """The label of the stock comm on the same loop that a configuration is set
    against (``asyncio@uvloop``: ``tcp@uvloop``; ``asyncio+tls@asyncio``:
    ``tls@asyncio``; the loop-less ``rawsock``: the reference loop), or None for
    the stock comms themselves and for ``proto``, which does no I/O."""
    if kind == "proto":
        return None
    stock = "tls" if tls else REFERENCE_SCHEME
    if kind == "comm" and scheme == stock:
        return None
    return f"{stock}@{loop or REFERENCE_LOOP}"


def available_default_schemes() -> list[str]:
    """tcp, tls, and asyncio/asyncio+tls when their entry points resolve."""
    out = ["tcp", "tls"]
    for scheme in ("asyncio", "asyncio+tls"):
        try:
            check_schemes([scheme])
        except BenchError:
            continue
        out.append(scheme)
    return out


#: The parts of ``comm``, in the order they run; ``--only`` picks some.
COMM_PARTS = ("ping", "stream", "bulk", "clients")


@dataclasses.dataclass(frozen=True)
class CommBounds:
    """Counts and time limits (seconds) of every loop of ``comm``."""

    reps: int
    ping_n: int
    ping_s: float
    stream_n: int
    stream_s: float
    bulk: dict[int, tuple[int, float]]  # frame size -> (max messages, max seconds)
    clients: tuple[int, ...]
    clients_s: float
    proto_n: int
    budget_s: float  # start no repetition that would likely end after this
    parts: tuple[str, ...] = COMM_PARTS  # which of COMM_PARTS run


@dataclasses.dataclass(frozen=True)
class ClusterBounds:
    """Sizes, repetitions and time limits of ``cluster`` and ``profile``."""

    reps: int
    wide: int
    tree: int
    shuffle: int
    workers: int
    threads: int
    workload_timeout_s: float
    budget_s: float  # start no repetition that would likely end after this


KiB, MiB, GiB = 1024, 1024 * 1024, 1024**3


def bulk_bounds(size: int) -> tuple[int, float]:
    """(max messages, max seconds) of one bulk size: 2 GiB of it, at least 8
    and at most 20,000 messages, within 0.5 s, or 1 s from 64 MiB up (where a
    message over TLS takes 40-60 ms here, so 0.5 s would time a dozen)."""
    return max(8, min(20_000, 2 * GiB // size)), 0.5 if size < 64 * MiB else 1.0


#: The bulk sizes of the full run. Besides the 64 KiB and 1 MiB of small data,
#: the sizes real traffic moves: P2P shuffle shards and rechunk pieces of a few
#: MiB to tens of MiB, ``gather_dep`` of 4-64 MiB chunks, and 128 MiB, where the
#: receiver's buffer reuse shows (a fresh 128 MiB buffer costs 64 huge-page
#: faults and their zeroing).
FULL_BULK = (64 * KiB, MiB, 4 * MiB, 16 * MiB, 32 * MiB, 64 * MiB, 128 * MiB)

COMM_BOUNDS = {
    # full: 3 repetitions (stats.MIN_PAIRS) of 8 comm configurations and 9
    # references. A budget that stops the run at 2 repetitions makes every comm
    # row "no measurable difference", so it is sized for 3 repetitions of up to
    # 160 s, half as slow again as one takes on the 2-core machine of the record
    # (bench/results/).
    "full": CommBounds(
        reps=3, ping_n=5000, ping_s=0.5, stream_n=100_000, stream_s=0.5,
        bulk={size: bulk_bounds(size) for size in FULL_BULK},
        clients=(1, 8, 32), clients_s=0.3, proto_n=3000, budget_s=480.0,
    ),
    # quick: what can show a difference in about a minute on 2 cores, 3 times
    # over on each side (stats.MIN_PAIRS): ping, stream and 64 KiB. The large
    # sizes and the concurrent clients are for comm and all.
    "quick": CommBounds(
        reps=3, ping_n=3000, ping_s=0.4, stream_n=40_000, stream_s=0.4,
        bulk={64 * KiB: (8000, 0.4)}, clients=(), clients_s=0.0, proto_n=1000,
        budget_s=150.0,
    ),
    "smoke": CommBounds(
        reps=1, ping_n=50, ping_s=0.2, stream_n=200, stream_s=0.2,
        bulk={64 * KiB: (10, 0.2), MiB: (3, 0.2)},
        clients=(1, 2), clients_s=0.1, proto_n=20, budget_s=30.0,
    ),
}

CLUSTER_BOUNDS = {
    # full: 3 repetitions (stats.MIN_PAIRS) of wide, tree and shuffle; the wide map
    # is about 8 s at 6,000 tasks/s. A repetition of all 8 configurations (TLS
    # schemes too) with both GC settings takes a few minutes on the record's
    # machine (bench/results/); the budget fits 3 repetitions of up to 400 s, so
    # that the TLS schemes do not stop the run at 2.
    "full": ClusterBounds(reps=3, wide=50_000, tree=4096, shuffle=50, workers=2,
                          threads=4, workload_timeout_s=120.0, budget_s=1200.0),
    # quick: the wide map alone, long enough (about 2 s) that a cluster's start and
    # the timer do not set its wall time, 3 times on each side.
    "quick": ClusterBounds(reps=3, wide=12_000, tree=0, shuffle=0, workers=2,
                           threads=4, workload_timeout_s=60.0, budget_s=240.0),
    "smoke": ClusterBounds(reps=1, wide=200, tree=64, shuffle=5, workers=1,
                           threads=2, workload_timeout_s=30.0, budget_s=60.0),
}

"""The garbage collector seen from inside the scheduler's process.

The driver runs :func:`start` and :func:`stop` on the scheduler with
``client.run_on_scheduler`` around a workload; nothing is installed in the
scheduler before that, and everything is removed after.

Two modes. ``timing`` only hooks ``gc.callbacks``: collections per generation,
the CPU time (``time.thread_time`` of the collecting thread) and the wall time
of each collection, the longest pause and the objects the collector freed; its
cost is two calls per collection. ``attribution`` also sets
``gc.DEBUG_SAVEALL``, so that each collection hands its garbage to
``gc.garbage`` instead of freeing it; the callback moves it into a list held
here (so a later collection does not find it again), and :func:`stop`
collects what is left, splits it into cycles (connected components of the
garbage's references among themselves) and names who made each one: the
frame chain of the exception in it, else the code of its frames or
functions, else its types. Then it drops what it held and collects it for
real. Attribution distorts the collector's timing (the held garbage stays in
the oldest generation), so timing figures come from ``timing`` runs only.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from typing import Any

#: Cycle kinds kept per run, the largest first.
TOP_KINDS = 12
#: Objects of held garbage analysed at most (a 20,000-task map leaves about
#: 800,000 before the draft): enough for every kind, and bounded in memory and time.
MAX_ANALYSED = 2_000_000


class _Probe:
    def __init__(self, attribution: bool) -> None:
        self.attribution = attribution
        self.collections = [0, 0, 0]
        self.collected = 0
        self.cpu = 0.0
        self.wall = 0.0
        self.longest = 0.0
        self.held: list[Any] = []
        self._t0 = (0.0, 0.0)

    def callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = (time.perf_counter(), time.thread_time())
            return
        wall = time.perf_counter() - self._t0[0]
        self.wall += wall
        self.cpu += time.thread_time() - self._t0[1]
        self.longest = max(self.longest, wall)
        self.collections[info["generation"]] += 1
        self.collected += info["collected"]
        if self.attribution and gc.garbage:
            self.held.extend(gc.garbage)
            gc.garbage.clear()


_probe: _Probe | None = None
_marks: dict[str, float] = {}


def _streams(scheduler: Any) -> list[Any]:
    """The scheduler's BatchedSends: one per worker and one per client."""
    out = list(getattr(scheduler, "stream_comms", {}).values())
    out += list(getattr(scheduler, "client_comms", {}).values())
    return out


def _batches(scheduler: Any) -> tuple[int, int]:
    streams = _streams(scheduler)
    return (sum(getattr(b, "batch_count", 0) for b in streams),
            sum(getattr(b, "message_count", 0) for b in streams))


def start(dask_scheduler: Any = None, attribution: bool = False) -> None:
    """Collect what is pending, then watch every collection until :func:`stop`."""
    global _probe
    if _probe is not None:
        _remove()
    gc.collect()
    _probe = _Probe(attribution)
    if attribution:
        gc.set_debug(gc.get_debug() | gc.DEBUG_SAVEALL)
    gc.callbacks.append(_probe.callback)
    batches, messages = _batches(dask_scheduler) if dask_scheduler is not None else (0, 0)
    _marks.update(process=time.process_time(), batches=batches, messages=messages)


def _remove() -> None:
    global _probe
    if _probe is not None and _probe.callback in gc.callbacks:
        gc.callbacks.remove(_probe.callback)
    gc.set_debug(gc.get_debug() & ~gc.DEBUG_SAVEALL)
    _probe = None


def stop(dask_scheduler: Any = None) -> dict[str, Any]:
    """What the collector did since :func:`start`, and in ``attribution`` mode
    what the cyclic garbage was made of."""
    probe = _probe
    if probe is None:
        raise RuntimeError("gc probe: stop() without start()")
    process = time.process_time() - _marks["process"]
    batches, messages = _batches(dask_scheduler) if dask_scheduler is not None else (0, 0)
    out: dict[str, Any] = {
        "collections": list(probe.collections), "collected": probe.collected,
        "gc_cpu_s": probe.cpu, "gc_wall_s": probe.wall, "longest_s": probe.longest,
        "process_cpu_s": process, "batches": batches - _marks["batches"],
        "messages": messages - _marks["messages"], "attribution": probe.attribution,
    }
    if probe.attribution:
        gc.collect()  # the cyclic garbage still pending: the workload made it too
        gc.callbacks.remove(probe.callback)
        held, probe.held = probe.held, []
        try:
            out.update(analyse(held))
        finally:
            _remove()
            del held
            gc.collect()
    else:
        _remove()
    return out


def _code_name(code: Any) -> str:
    name = getattr(code, "co_qualname", code.co_name)
    path = code.co_filename.replace("\\", "/")
    for marker in ("/site-packages/", "/lib/python"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path.rsplit('.py', 1)[0].replace('/', '.').lstrip('.')}.{name}"


def exception_chain(exc: BaseException) -> str:
    """``Type: outer > ... > inner``, the frames its traceback went through."""
    frames = []
    tb = exc.__traceback__
    while tb is not None and len(frames) < 8:
        frames.append(_code_name(tb.tb_frame.f_code))
        tb = tb.tb_next
    return f"{type(exc).__name__}: " + " > ".join(frames or ["(no traceback)"])


def _creator(objs: list[Any]) -> str:
    excs = [o for o in objs if isinstance(o, BaseException)]
    if excs:
        return exception_chain(excs[0])
    codes = sorted({_code_name(o.f_code) for o in objs if type(o).__name__ == "frame"})
    if not codes:
        codes = sorted({_code_name(o.__code__) for o in objs
                        if type(o).__name__ == "function"})
    if codes:
        return "code: " + ", ".join(codes[:3]) + (" ..." if len(codes) > 3 else "")
    types = Counter(type(o).__name__ for o in objs)
    return "types: " + ", ".join(f"{t}" for t, _ in types.most_common(4))


def analyse(garbage: list[Any]) -> dict[str, Any]:
    """The garbage split into cycles (weakly connected components of the
    references among its objects), grouped by who made them."""
    garbage = garbage[:MAX_ANALYSED]
    index = {id(o): i for i, o in enumerate(garbage)}
    parent = list(range(len(garbage)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, obj in enumerate(garbage):
        for ref in gc.get_referents(obj):
            j = index.get(id(ref))
            if j is not None:
                a, b = find(i), find(j)
                if a != b:
                    parent[a] = b
    comps: dict[int, list[Any]] = {}
    for i, obj in enumerate(garbage):
        comps.setdefault(find(i), []).append(obj)
    kinds: dict[str, dict[str, Any]] = {}
    exceptions: Counter[str] = Counter()
    for objs in comps.values():
        who = _creator(objs)
        k = kinds.setdefault(who, {"cycles": 0, "objects": 0, "types": Counter()})
        k["cycles"] += 1
        k["objects"] += len(objs)
        if k["cycles"] <= 3:
            k["types"].update(type(o).__name__ for o in objs)
        exceptions.update(type(o).__name__ for o in objs if isinstance(o, BaseException))
    top = sorted(kinds.items(), key=lambda kv: -kv[1]["objects"])
    return {
        "cyclic_objects": len(garbage),
        "cycles": len(comps),
        "exceptions": dict(exceptions),
        "kinds": [{"creator": who, "cycles": k["cycles"], "objects": k["objects"],
                   "types": dict(Counter({t: round(n / min(k["cycles"], 3), 1)
                                          for t, n in k["types"].items()}).most_common(10))}
                  for who, k in top[:TOP_KINDS]],
        "other_objects": sum(k["objects"] for _, k in top[TOP_KINDS:]),
    }

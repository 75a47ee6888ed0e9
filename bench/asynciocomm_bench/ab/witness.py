"""A dask preload that records which comm a process of a script really used.

``ab`` lists it in distributed's preload settings of the scheduler, workers,
nannies and clients (after ``asynciocomm.preload`` on asynciocomm's side), so
that every such object of the script, in every process, writes a record into
the directory named by ``WITNESS_DIR_ENV``:

- at ``dask_setup`` (after the object's listeners are open, before it serves):
  its role, process id, event loop, the backends registered for ``tcp`` and
  ``tls``, and its listeners' classes;
- at ``dask_teardown`` (before its comms are closed): the classes of the comms
  it holds (its connection pool, batched streams, a client's scheduler comm).

A scheduler also records the CPU time of its event-loop thread at both points
(``time.thread_time``: the hooks run on that thread), and its process's CPU.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

WITNESS_DIR_ENV = "ASYNCIOCOMM_BENCH_WITNESS_DIR"


def qualname(obj: Any) -> str:
    """``module.Class`` of an object."""
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def role(obj: Any) -> str:
    """scheduler, nanny, worker or client."""
    from distributed import Client, Nanny, Scheduler, Worker

    for cls, name in ((Scheduler, "scheduler"), (Nanny, "nanny"), (Worker, "worker"),
                      (Client, "client")):
        if isinstance(obj, cls):
            return name
    return type(obj).__name__.lower()


def held_comms(obj: Any) -> list[str]:
    """The classes of the comms an object holds now."""
    found: set[str] = set()
    pool = getattr(obj, "rpc", None)
    for group in (getattr(pool, "available", None) or {}, getattr(pool, "occupied", None) or {}):
        for comms in list(group.values()):
            found.update(qualname(c) for c in list(comms))
    streams = [*(getattr(obj, "stream_comms", None) or {}).values(),
               *(getattr(obj, "client_comms", None) or {}).values(),
               getattr(obj, "batched_stream", None), getattr(obj, "scheduler_comm", None)]
    for stream in streams:
        comm = getattr(stream, "comm", None)
        if comm is not None:
            found.add(qualname(comm))
    return sorted(found)


def _loop() -> str | None:
    try:
        return qualname(asyncio.get_running_loop())
    except RuntimeError:
        return None


def _path(obj: Any) -> Path | None:
    folder = os.environ.get(WITNESS_DIR_ENV)
    if not folder:
        return None
    return Path(folder) / f"{role(obj)}-{os.getpid()}-{id(obj):x}.json"


def _write(path: Path, record: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def _cpu() -> dict[str, float]:
    t = os.times()
    return {"loop_cpu_s": time.thread_time(), "process_cpu_s": t.user + t.system}


def dask_setup(obj: Any) -> None:
    """Record the process's backends, loop and listeners."""
    from distributed.comm.registry import backends

    path = _path(obj)
    if path is None:
        return
    record: dict[str, Any] = {
        "role": role(obj), "pid": os.getpid(), "loop": _loop(),
        "backends": {s: qualname(backends[s]) for s in ("tcp", "tls") if s in backends},
        "listeners": sorted({qualname(lst) for lst in getattr(obj, "listeners", [])}),
        "comms": held_comms(obj),
    }
    if record["role"] == "scheduler":
        record["setup"] = _cpu()
    _write(path, record)


def dask_teardown(obj: Any) -> None:
    """Add the comms the object holds, and a scheduler's CPU."""
    path = _path(obj)
    if path is None or not path.exists():
        return
    record = json.loads(path.read_text())
    record["comms"] = sorted(set(record["comms"]) | set(held_comms(obj)))
    record["torn_down"] = True
    if record["role"] == "scheduler":
        record["teardown"] = _cpu()
    _write(path, record)

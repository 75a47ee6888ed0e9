"""Analysis of py-spy speedscope files: the scheduler's time per category.

Each sample of the scheduler's MainThread gets one category:

- ``idle``: the loop waits (leaf in ``selectors`` select, or only the
  runner's frames left, as with uvloop whose loop is Cython);
- ``gc``: the collector runs (native ``gc_collect_*`` frames, with
  ``py-spy --native``, or distributed's GC helpers);
- otherwise the outermost frame that matches, from the root to the leaf:
  ``comm read`` / ``comm write`` (stock ``distributed/comm/tcp.py`` and
  tornado's iostream, ``asynciocomm/`` code, asyncio's selector/SSL
  transports; every callee, including ``from_frames``/``to_frames``/
  ``loads``/``dumps``, counts with the comm call it runs under),
  ``comm other`` (comm code that neither reads nor writes),
  ``transitions`` (``handle_task_finished``, ``_transition``...),
  ``update_graph``;
- ``other`` for the rest.

``comm read`` and ``comm write`` are split into parts: ``(de)serialization``
when any frame under the comm call is serialization code (distributed's
``protocol`` package and ``comm/utils.py``, msgpack, pickle, cloudpickle, dask's
task spec reducers, ``asynciocomm/serialization/fast.py``), else ``transport``. Both
comms must produce the same wire bytes, so the first part is shared work; the
second is what a transport can save.

``update_graph`` is split into parts: ``new tasks`` and ``other`` on the
MainThread, and ``order`` / ``unpack`` which distributed offloads to its
``Dask-Offload`` thread (counted there, as a share of the MainThread's
sample count).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

CATEGORIES = ("comm read", "comm write", "comm other", "transitions",
              "update_graph", "gc", "idle", "other")

READ_NAMES = {"buffer_updated", "get_buffer", "data_received", "eof_received",
              "recv_into", "recv"}
WRITE_NAMES = {"_write_ready", "writelines", "flush", "drain", "sendmsg", "send",
               "sendall", "_background_send"}
TRANSITION_NAMES = {"handle_task_finished", "stimulus_task_finished",
                    "handle_task_erred", "stimulus_task_erred", "transitions",
                    "_transitions", "transition", "_transition",
                    "handle_release_data", "handle_long_running",
                    "stimulus_queue_slots_maybe_opened", "send_all"}
GC_NAMES = {"gc_collect_main", "gc_collect_with_callback", "gc_collect_generations",
            "_PyGC_Collect", "gc_collect", "gc_collect_impl", "collect_generations",
            "PyGC_Collect", "gc_collect_region", "_Py_RunGC"}
NEW_TASK_NAMES = {"_create_taskstate_from_graph", "_generate_taskstates",
                  "new_task", "_apply_annotations", "_set_priorities"}
UNPACK_NAMES = {"_materialize_graph", "convert_legacy_graph", "loads",
                "materialize", "unpack_remotedata", "_get_dependencies"}


SERIALIZATION_PATHS = ("distributed/protocol/", "distributed/comm/utils.py", "/msgpack/",
                       "/pickle.py", "/copyreg.py", "/cloudpickle/", "dask/_task_spec.py",
                       "asynciocomm/serialization/fast.py")
SERIALIZATION_NATIVE = ("msgpack", "_pickle")
#: Framing helpers that live in distributed/protocol but are transport work.
FRAMING_NAMES = {"pack_frames_prelude", "pack_frames", "unpack_frames"}


def _base(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _norm(path: str) -> str:
    return (path or "").replace("\\", "/")


def _is_comm_code(path: str) -> bool:
    return ("distributed/comm/" in path and not path.endswith("/utils.py")) \
        or "tornado/iostream.py" in path or "/asynciocomm/" in path \
        or path.startswith("asynciocomm/") or "distributed/batched.py" in path


def _is_transport(path: str) -> bool:
    return "asyncio/selector_events.py" in path or "asyncio/sslproto.py" in path \
        or "asyncio/streams.py" in path


def _direction(base: str) -> str | None:
    low = base.lower().replace("ready", "")  # "_write_ready" is a write
    if base in WRITE_NAMES or "write" in low:
        return "comm write"
    if base in READ_NAMES or "read" in low:
        return "comm read"
    return None


def frame_kind(frame: dict[str, Any]) -> str | None:
    """The category a single frame implies, or None."""
    name = frame.get("name") or ""
    path = _norm(frame.get("file") or "")
    base = _base(name)
    if base in GC_NAMES or "distributed/utils_perf.py" in path:
        return "gc"
    if _is_comm_code(path):
        return _direction(base) or "comm other"
    if _is_transport(path):
        return _direction(base)
    if path.endswith("distributed/scheduler.py"):
        if base in TRANSITION_NAMES or base.startswith("_transition_"):
            return "transitions"
        if base in ("update_graph", "_update_graph"):
            return "update_graph"
    return None


def _is_idle(leaf: dict[str, Any]) -> bool:
    path = _norm(leaf.get("file") or "")
    base = _base(leaf.get("name") or "")
    if path.endswith("selectors.py") and base in ("select", "poll"):
        return True
    if path.endswith("asyncio/runners.py") or path.endswith("distributed/compatibility.py"):
        return True
    return base in ("epoll_wait", "uv__io_poll", "__GI_epoll_wait", "poll")


def _is_native(frame: dict[str, Any]) -> bool:
    path = _norm(frame.get("file") or "")
    return not path.endswith(".py") and not path.startswith("<")


def categorize(stack: list[dict[str, Any]]) -> str:
    """The category of one sample, its frames ordered root first."""
    if not stack:
        return "other"
    kinds = [frame_kind(f) for f in stack]
    if "gc" in kinds:
        return "gc"
    py = [f for f in stack if not _is_native(f)]
    if _is_idle(stack[-1]) or (py and _is_idle(py[-1])):
        return "idle"
    for i, kind in enumerate(kinds):
        if kind is None:
            continue
        if kind == "comm other":
            deeper = [k for k in kinds[i + 1:] if k in ("comm read", "comm write")]
            return deeper[0] if deeper else "comm other"
        return kind
    return "other"


def _is_serialization(frame: dict[str, Any]) -> bool:
    if _base(frame.get("name") or "") in FRAMING_NAMES:
        return False
    path = _norm(frame.get("file") or "")
    if any(p in path for p in SERIALIZATION_PATHS):
        return True
    return _is_native(frame) and any(n in path for n in SERIALIZATION_NATIVE)


def comm_part(stack: list[dict[str, Any]]) -> str | None:
    """For a comm read/write sample: "(de)serialization" or "transport"."""
    inside = False
    for f in stack:
        if not inside:
            inside = frame_kind(f) in ("comm read", "comm write", "comm other")
        elif _is_serialization(f):
            return "(de)serialization"
    return "transport" if inside else None


def update_graph_part(stack: list[dict[str, Any]]) -> str | None:
    """For a MainThread sample inside update_graph: "new tasks" or "other"."""
    inside = False
    for f in stack:
        base = _base(f.get("name") or "")
        if frame_kind(f) == "update_graph":
            inside = True
        elif inside and base in NEW_TASK_NAMES:
            return "new tasks"
    return "other" if inside else None


def offload_part(stack: list[dict[str, Any]]) -> str | None:
    """For an offload-thread sample: "order", "unpack" or None."""
    for f in stack:
        path = _norm(f.get("file") or "")
        base = _base(f.get("name") or "")
        if path.endswith("dask/order.py") or base == "order":
            return "order (offload thread)"
        if base in UNPACK_NAMES and ("distributed/" in path or "dask/" in path):
            return "unpack (offload thread)"
    return None


def load(path: str | Path) -> dict[str, Any]:
    """Read a speedscope JSON file."""
    with open(path) as f:
        doc = json.load(f)
    if "profiles" not in doc or "shared" not in doc:
        raise ValueError(f"{path} is not a speedscope file")
    return doc


def _stacks(doc: dict[str, Any],
            profile: dict[str, Any]) -> list[tuple[list[dict[str, Any]], float]]:
    frames = doc["shared"]["frames"]
    weights = profile.get("weights") or [1.0] * len(profile["samples"])
    return [([frames[i] for i in s], float(w)) for s, w in zip(profile["samples"], weights)]


def main_thread(doc: dict[str, Any], name: str = "MainThread") -> dict[str, Any]:
    """The profile of the thread ``name`` (the scheduler's event loop: MainThread in
    a scheduler process, "IO loop" in a process where distributed started the
    loop in a thread), else the one with the most samples."""
    profs = doc["profiles"]
    for p in profs:
        if f'"{name}"' in p.get("name", "") or p.get("name", "").endswith(name):
            return p
    return max(profs, key=lambda p: len(p.get("samples", [])))


def analyze(doc: dict[str, Any], thread: str = "MainThread") -> dict[str, Any]:
    """Shares of the loop thread's samples per category, and update_graph parts."""
    main = main_thread(doc, thread)
    counts: Counter[str] = Counter({c: 0.0 for c in CATEGORIES})
    parts: Counter[str] = Counter()
    comm_parts: Counter[str] = Counter({"transport": 0.0, "(de)serialization": 0.0})
    total = 0.0
    for stack, w in _stacks(doc, main):
        cat = categorize(stack)
        counts[cat] += w
        total += w
        if cat == "update_graph":
            parts[update_graph_part(stack) or "other"] += w
        elif cat in ("comm read", "comm write"):
            comm_parts[comm_part(stack) or "transport"] += w
    for prof in doc["profiles"]:
        if prof is main or "Offload" not in prof.get("name", ""):
            continue
        for stack, w in _stacks(doc, prof):
            part = offload_part(stack)
            if part and not _is_idle(stack[-1]):
                parts[part] += w
    shares = {c: (counts[c] / total if total else 0.0) for c in CATEGORIES}
    if total:  # make the shares sum to exactly 1 despite float rounding
        shares["other"] = max(0.0, 1.0 - sum(v for k, v in shares.items() if k != "other"))
    return {
        "thread": main.get("name"),
        "samples": len(main.get("samples", [])),
        "shares": shares,
        "busy_shares": {c: (counts[c] / (total - counts["idle"]))
                        if total - counts["idle"] > 0 else 0.0
                        for c in CATEGORIES if c != "idle"},
        "update_graph_parts": {k: v / total for k, v in sorted(parts.items())} if total else {},
        "comm_parts": {k: v / total for k, v in comm_parts.items()} if total else {},
    }

"""The scheduler's MainThread categories at scale, from a py-spy speedscope file.

On top of :mod:`asynciocomm_bench.profile.speedscope`'s categories (comm read, comm write, comm
other, transitions, update_graph, gc, idle, other), the comm's samples are split
into what a transport does and the (de)serialization it calls, and the latter
into three parts:

- ``task specs (pickle)``: pickling or unpickling a ``ToPickle`` payload, the
  ``Task`` specs of ``compute-task`` messages: any frame of ``pickle``,
  ``cloudpickle``, ``copyreg``, distributed's ``protocol/pickle.py``, dask's
  ``_task_spec.py`` or the C ``_pickle`` module, and distributed's
  ``create_pickled_sub_frames`` or asynciocomm's ``_pickle_inband`` around them;
- ``msgpack``: the rest of a sample that is in msgpack (its C extension or its
  Python fallback);
- ``other (de)serialization``: the rest of distributed's protocol code
  (``to_frames``, ``from_frames``, ``dumps``/``loads`` themselves, sizing...).

The flat categories, which sum to 1, are then: ``comm read``, ``comm write``
(their transport part only), ``comm other``, the three parts above,
``transitions``, ``update_graph``, ``gc``, ``idle`` and ``other``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from asynciocomm_bench.profile import speedscope as ss

SER_PARTS = ("task specs (pickle)", "msgpack", "other (de)serialization")
FLAT = ("comm read", "comm write", "comm other", *SER_PARTS, "transitions",
        "update_graph", "gc", "idle", "other")
#: Categories that make up the comm's share: its transport and what it calls.
COMM = ("comm read", "comm write", "comm other", *SER_PARTS)

PICKLE_PATHS = ("/pickle.py", "/cloudpickle/", "/copyreg.py",
                "distributed/protocol/pickle.py", "dask/_task_spec.py")
PICKLE_NAMES = {"create_pickled_sub_frames", "_pickle_inband"}
MSGPACK_PATHS = ("/msgpack/", "_cmsgpack", "unpack_template.h", "msgpack")


def serialization_part(stack: list[dict[str, Any]]) -> str:
    """Which part of (de)serialization a comm sample's stack is in."""
    msgpack = False
    for f in stack:
        path = ss._norm(f.get("file") or "")
        name = ss._base(f.get("name") or "")
        if name in PICKLE_NAMES or any(p in path for p in PICKLE_PATHS) \
                or (ss._is_native(f) and "_pickle" in path):
            return "task specs (pickle)"
        if any(p in path for p in MSGPACK_PATHS):
            msgpack = True
    return "msgpack" if msgpack else "other (de)serialization"


def flat_category(stack: list[dict[str, Any]]) -> tuple[str, str]:
    """(the base category, the flat category) of one sample."""
    cat = ss.categorize(stack)
    if cat in ("comm read", "comm write", "comm other") \
            and ss.comm_part(stack) == "(de)serialization":
        return cat, serialization_part(stack)
    return cat, cat


def analyze(doc: dict[str, Any]) -> dict[str, Any]:
    """:func:`asynciocomm_bench.profile.speedscope.analyze`, plus the flat categories' shares, the
    (de)serialization parts per direction, and the comm's share."""
    base = ss.analyze(doc)
    main = ss.main_thread(doc)
    flat: Counter[str] = Counter({c: 0.0 for c in FLAT})
    by_dir: Counter[tuple[str, str]] = Counter()
    total = 0.0
    for stack, w in ss._stacks(doc, main):
        cat, part = flat_category(stack)
        flat[part] += w
        total += w
        if part in SER_PARTS:
            by_dir[(cat, part)] += w
    shares = {c: flat[c] / total if total else 0.0 for c in FLAT}
    busy = total - flat["idle"]
    base.update({
        "flat_shares": shares,
        "flat_busy_shares": {c: flat[c] / busy if busy > 0 else 0.0
                             for c in FLAT if c != "idle"},
        "serialization_by_direction": {f"{d}: {p}": v / total if total else 0.0
                                       for (d, p), v in sorted(by_dir.items())},
        "comm_share": sum(shares[c] for c in COMM),
    })
    return base

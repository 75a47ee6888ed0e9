"""The versioned JSON result document: create, validate, save, load."""

from __future__ import annotations

import datetime
import json
import math
import shlex
import sys
from pathlib import Path
from typing import Any

from asynciocomm_bench import SCHEMA

#: Sections of samples (validated, and merged sample by sample); any other
#: section (profile, multihome) is taken whole from the first document that has it.
SAMPLED = ("comm", "cluster", "scale", "gc", "workloads", "ab")
SECTION_KEYS = {"configs": list, "reference": str, "metrics": dict, "samples": list,
                "summary": dict}
SAMPLE_KEYS = {"rep": int, "config": str, "metric": str}


def new_document(mode: str, argv: list[str] | None = None) -> dict[str, Any]:
    """An empty result document with the run's command and start time."""
    from asynciocomm_bench.common import environment

    argv = sys.argv[1:] if argv is None else argv
    return {
        "schema": SCHEMA,
        "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": "asynciocomm-bench " + shlex.join(argv),
        "mode": mode,
        "environment": environment.describe(),
    }


def validate(doc: Any) -> list[str]:
    """Problems that make ``doc`` unreadable as schema asynciocomm-bench/1."""
    errs: list[str] = []
    if not isinstance(doc, dict):
        return ["document is not an object"]
    if doc.get("schema") != SCHEMA:
        errs.append(f"schema is {doc.get('schema')!r}, expected {SCHEMA!r}")
    for key, typ in (("created", str), ("command", str), ("environment", dict)):
        if not isinstance(doc.get(key), typ):
            errs.append(f"{key} missing or not {typ.__name__}")
    env = doc.get("environment") or {}
    for key in ("cpu_model", "cpu_count", "python", "versions"):
        if key not in env:
            errs.append(f"environment.{key} missing")
    if not any(k in doc for k in ("profile", *SAMPLED)):
        errs.append("no comm, cluster, profile, scale, gc, workloads or ab section")
    for name in SAMPLED:
        sec = doc.get(name)
        if sec is None:
            continue
        for key, typ in SECTION_KEYS.items():
            if not isinstance(sec.get(key), typ):
                errs.append(f"{name}.{key} missing or not {typ.__name__}")
        labels = {c.get("label") for c in sec.get("configs", []) if isinstance(c, dict)}
        for i, row in enumerate(sec.get("samples", [])):
            for key, typ in SAMPLE_KEYS.items():
                if not isinstance(row.get(key), typ):
                    errs.append(f"{name}.samples[{i}].{key} missing or not {typ.__name__}")
            if not isinstance(row.get("value"), (int, float)):
                errs.append(f"{name}.samples[{i}].value is not a number")
            if row.get("config") not in labels:
                errs.append(f"{name}.samples[{i}].config {row.get('config')!r} unknown")
            if row.get("metric") not in sec.get("metrics", {}):
                errs.append(f"{name}.samples[{i}].metric {row.get('metric')!r} unknown")
            if len(errs) > 20:
                return errs
    prof = doc.get("profile")
    if prof is not None:
        if not isinstance(prof.get("runs"), list):
            errs.append("profile.runs missing or not list")
        for i, run in enumerate(prof.get("runs") or []):
            shares = run.get("shares")
            if not isinstance(shares, dict):
                errs.append(f"profile.runs[{i}].shares missing")
            elif shares and abs(sum(shares.values()) - 1.0) > 1e-6:
                errs.append(f"profile.runs[{i}].shares do not sum to 1")
    return errs


def _clean(obj: Any) -> Any:
    """Replace NaN/inf (not valid JSON) by None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def save(doc: dict[str, Any], outdir: str | Path) -> Path:
    """Write ``results.json`` into ``outdir`` and return its path."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps(_clean(doc), indent=1, allow_nan=False) + "\n")
    return path


def load(path: str | Path) -> dict[str, Any]:
    """Read a result document (a file, or a directory holding results.json)."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    doc = json.loads(p.read_text())
    errs = validate(doc)
    if errs:
        from asynciocomm_bench.common.options import BenchError

        raise BenchError(f"{p}: not a valid {SCHEMA} document: {'; '.join(errs[:3])}")
    return doc


#: The sections a result document may have.
SECTIONS = ("comm", "cluster", "profile", "scale", "multihome", "gc", "workloads", "ab")


def only(doc: dict[str, Any], keep: tuple[str, ...] | None) -> dict[str, Any]:
    """``doc`` with only the sections ``keep`` (all of them when None)."""
    if keep is None:
        return doc
    return {k: v for k, v in doc.items() if k not in SECTIONS or k in keep}



def _merge_section(secs: list[dict[str, Any]]) -> dict[str, Any]:
    """One section from the same section of several runs.

    Each run's repetitions keep their own numbers, shifted past the runs before,
    so that a ratio is only ever paired within one repetition of one run.
    """
    from asynciocomm_bench.common.stats import summarize

    out = dict(secs[0])
    configs = {c["label"]: c for c in secs[0]["configs"]}
    samples = list(secs[0]["samples"])
    metrics = dict(secs[0]["metrics"])
    same_loop = dict(secs[0].get("same_loop_refs") or {})
    lists = {k: list(secs[0].get(k) or []) for k in ("profiles", "errors", "runs")}
    for sec in secs[1:]:
        shift = 1 + max((s["rep"] for s in samples), default=-1)
        for c in sec["configs"]:
            configs.setdefault(c["label"], c)
        samples += [{**s, "rep": s["rep"] + shift} for s in sec["samples"]]
        metrics.update(sec["metrics"])
        same_loop.update(sec.get("same_loop_refs") or {})
        for key, items in lists.items():
            items += [{**e, "rep": e["rep"] + shift} if "rep" in e else e
                      for e in sec.get(key) or []]
        for key in ("workers", "graph_workers", "workloads"):
            if key in out:
                out[key] = list(dict.fromkeys([*out[key], *sec.get(key, [])]))
        out["loop_classes"] = {**(out.get("loop_classes") or {}),
                               **(sec.get("loop_classes") or {})}
    for key in ("workers", "graph_workers"):
        if key in out:
            out[key] = sorted(out[key])
    out.update(configs=list(configs.values()), samples=samples, metrics=metrics,
               same_loop_refs=same_loop,
               summary=summarize(samples, metrics, out["reference"], same_loop),
               reps_done=_reps_per_config(samples),
               truncated=any(s.get("truncated") for s in secs),
               seconds=sum(s.get("seconds", 0.0) for s in secs),
               **{k: v for k, v in lists.items() if k in out})
    return out


def _reps_per_config(samples: list[dict[str, Any]]) -> int:
    """The most repetitions any one configuration has among ``samples``."""
    reps: dict[str, set[int]] = {}
    for s in samples:
        reps.setdefault(s["config"], set()).add(s["rep"])
    return max((len(r) for r in reps.values()), default=0)


def merge(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """One document from several runs' documents (``report A B ...``).

    A section that several runs have is merged (:func:`_merge_section`); the
    document's command, start time and environment are the first run's, and
    ``merged_from`` names every run.
    """
    if len(docs) == 1:
        return docs[0]
    out = dict(docs[0])
    for name in {k for d in docs for k in d} - set(out):
        out[name] = next(d[name] for d in docs if name in d)
    for name in SAMPLED:
        secs = [d[name] for d in docs if d.get(name)]
        if len(secs) > 1:
            out[name] = _merge_section(secs)
    out["merged_from"] = [{"command": d["command"], "created": d["created"],
                           "load": d["environment"].get("load")} for d in docs]
    return out

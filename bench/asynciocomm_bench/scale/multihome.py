"""Which contact address a worker on a multi-homed host advertises.

The worker host ``h0`` gets two links: ``eth0`` on the cluster's bridge, and
``eth1`` on a second bridge that no other host is on, which carries its default
route (as a host whose public interface is not the cluster's network). The
worker listens on every interface (no ``--host``), as ``dask worker`` does by
default. For each case the check records the address the worker advertises,
its listener's class, whether the scheduler (``client.run`` on that worker)
and the client (a direct connection) can reach it, and whether a task's result
reaches the client (the scheduler fetches it from the worker's address).

distributed's worker passes its scheduler-facing IP (``default_host``) to its
listener only for ``tcp`` and ``tls``; ``patches/0002`` passes it to every
IP-based backend. The cases: stock ``tcp``, ``tcp`` with the asynciocomm
takeover in the worker, ``asyncio``, ``asyncio+tls`` and, when the
distributed sdist can be had (``asynciocomm_bench.common.sdist``:
``$ASYNCIOCOMM_DISTRIBUTED_SDIST``,
the cache, else PyPI, as ``bench/tests/test_patches.py`` gets it), ``asyncio``
and ``asyncio+tls`` with ``patches/0002`` applied to the worker's distributed.

    python -m asynciocomm_bench.scale.multihome client SCHEDULER_FILE TLS(0|1) OUT.json REACH(0|1)
is the client part, run on the client host.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.options import is_tls
from asynciocomm_bench.common.tlsfiles import make_host_tls
from asynciocomm_bench.scale import netns
from asynciocomm_bench.scale.cluster import ScaleCluster

#: (label, scheme, takeover in the worker, patches/0002 in the worker)
CASES = (("tcp (stock)", "tcp", False, False),
         ("tcp (asynciocomm takeover)", "tcp", True, False),
         ("asyncio", "asyncio", False, False),
         ("asyncio+tls", "asyncio+tls", False, False),
         ("asyncio, patches/0002", "asyncio", False, True),
         ("asyncio+tls, patches/0002", "asyncio+tls", False, True))
#: The scheduler gives up on an unreachable worker after this (distributed's
#: connect timeout, lowered from 30 s so that a check takes seconds).
CONNECT_TIMEOUT = "4s"


def patched_distributed(workdir: Path) -> tuple[Path | None, str]:
    """A copy of the pinned distributed with ``patches/0002`` applied, or None and
    why not (no sdist: not set, not cached and PyPI out of reach)."""
    import distributed

    from asynciocomm_bench.common import sdist as sdists

    patch = next(iter(sorted(sdists.PATCHES.glob("0002-*.patch"))), None)
    if patch is None:
        return None, "patches/0002 is missing"
    sdist, how = sdists.fetch(distributed.__version__)
    if sdist is None:
        return None, how
    with tarfile.open(sdist) as tf:
        tf.extractall(workdir, filter="data")
    tree = next(workdir.glob("distributed-*"))
    subprocess.run(["git", "apply", "-p1", str(patch)], cwd=tree, check=True,
                   capture_output=True, timeout=60)
    return tree, f"patches/0002 applied to distributed's sdist ({how})"


async def _probe(sched_file: str, tls: bool, reach: bool = True) -> dict[str, Any]:
    from distributed import Client
    from distributed.comm import connect
    from distributed.security import Security

    security = Security()
    async with Client(scheduler_file=sched_file, asynchronous=True,
                      security=security if tls else None, timeout=30) as client:
        await asyncio.wait_for(client.wait_for_workers(1), 60)
        addr = next(iter(client.scheduler_info()["workers"]))
        out: dict[str, Any] = {"advertised": addr}
        if not reach:
            return out
        try:
            await asyncio.wait_for(client.run(_one, workers=[addr]), 15)
            out["scheduler_reaches_it"] = True
        except Exception as exc:
            out["scheduler_reaches_it"] = False
            out["scheduler_error"] = f"{type(exc).__name__}: {exc}"[:300]
        try:
            result = await asyncio.wait_for(client.submit(_one, pure=False), 20)
            out["result_reaches_client"] = result == 1
        except Exception as exc:
            out["result_reaches_client"] = False
            out["result_error"] = f"{type(exc).__name__}: {exc}"[:300]
        try:
            comm = await connect(addr, timeout=5, **security.get_connection_args("client"))
            await comm.close()
            out["client_reaches_it"] = True
        except Exception as exc:
            out["client_reaches_it"] = False
            out["client_error"] = f"{type(exc).__name__}: {exc}"[:300]
        return out


def _one() -> int:
    return 1


def run_case(scheme: str, takeover: bool, patched: Path | None, hosts: dict[str, netns.Host],
             tls: Any, workdir: Path, reach: bool = True) -> dict[str, Any]:
    """One case: a scheduler, one worker on the multi-homed host, the probe."""
    config = {"distributed": {"comm": {"timeouts": {"connect": CONNECT_TIMEOUT}}}}
    with ScaleCluster(scheme, "asyncio", 1, hosts, workdir, tls if is_tls(scheme) else None,
                      config=config, listen_host={"h0": None},
                      worker_args=("--takeover",) if takeover else (),
                      pythonpath={"h0": str(patched)} if patched else None) as cluster:
        out_file = workdir / "probe.json"
        probe = cluster.spawn("c", "probe", ["-m", "asynciocomm_bench.scale.multihome", "client",
                                             str(cluster.scheduler_file),
                                             "1" if is_tls(scheme) else "0", str(out_file),
                                             "1" if reach else "0"])
        probe.wait(120)
        if not out_file.exists():
            raise RuntimeError(f"probe failed: {cluster.log_tail('probe')}")
        out = json.loads(out_file.read_text())
        for line in cluster.log_tail("workers-h0", 50).splitlines():
            if line.startswith("WORKER "):
                out["listener"] = line.split()[3]
    h0 = hosts["h0"]
    host = out["advertised"].split("://")[1].rsplit(":", 1)[0]
    out["interface"] = {h0.address: "eth0 (cluster network)",
                        h0.second: "eth1 (default route; scheduler not on it)"}.get(host, host)
    return out


def check(loopback: bool = False, cases: tuple[str, ...] | None = None,
          reach: bool = True) -> dict[str, Any]:
    """Run the cases (all by default; else those labelled ``cases``); the JSON
    section ``multihome``. Without ``reach``, only the advertised addresses."""
    names = ["s", "c", "h0"]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="asynciocomm-bench-multihome-") as tmp, \
            netns.network(names, multihomed=("h0",), loopback=loopback) as (hosts, why):
        if why:
            return {"skipped": f"needs network namespaces ({why})", "cases": []}
        tls = make_host_tls(Path(tmp) / "tls", {h: [x.address, *([x.second] if x.second else [])]
                                                for h, x in hosts.items()})
        wanted = [c for c in CASES if cases is None or c[0] in cases]
        patched, patch_note = patched_distributed(Path(tmp) / "patched") \
            if any(c[3] for c in wanted) else (None, "")
        for label, scheme, takeover, with_patch in wanted:
            entry: dict[str, Any] = {"case": label, "scheme": scheme}
            if with_patch and patched is None:
                entry["skipped"] = patch_note
            else:
                try:
                    entry.update(run_case(scheme, takeover, patched if with_patch else None,
                                          hosts, tls, Path(tmp) / label.replace(" ", "_"),
                                          reach))
                except Exception as exc:
                    entry["error"] = f"{type(exc).__name__}: {exc}"[:500]
            results.append(entry)
        return {"cases": results, "patch": patch_note,
                "worker_host": {"eth0": hosts["h0"].address, "eth1": hosts["h0"].second},
                "scheduler": hosts["s"].address}


def main(argv: list[str]) -> int:
    """``client SCHEDULER_FILE TLS OUT REACH``: the probe; no argument: the whole check."""
    if argv and argv[0] == "client":
        from asynciocomm_bench.scale.lifeline import die_with_parent

        die_with_parent()
        out = asyncio.run(_probe(argv[1], argv[2] == "1", argv[4] == "1"))
        Path(argv[3]).write_text(json.dumps(out))
        return 0
    print(json.dumps(check(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

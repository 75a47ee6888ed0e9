"""One measured cluster of the scale bench: start it, drive it, stop it."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from asynciocomm_bench.common.options import is_tls
from asynciocomm_bench.common.tlsfiles import HostTLS
from asynciocomm_bench.scale.cluster import ScaleCluster
from asynciocomm_bench.scale.graphs import Sizes
from asynciocomm_bench.scale.netns import Host


@dataclasses.dataclass(frozen=True)
class RunBounds:
    """Time limits of one cluster (seconds)."""

    start_timeout_s: float = 180.0
    workload_timeout_s: float = 300.0

    def driver_timeout(self, nworkloads: int) -> float:
        """The most a driver may take: start, every workload and a profile."""
        return self.start_timeout_s + (nworkloads + 2) * (self.workload_timeout_s + 60)


def run_cluster(scheme: str, loop: str, workers: int, hosts: dict[str, Host],
                tls: HostTLS | None, workdir: Path, sizes: Sizes, bounds: RunBounds,
                config: dict[str, Any] | None = None,
                profile: dict[str, Any] | None = None,
                workloads: list[str] | None = None,
                pythonpath: str | None = None,
                gc_attribution: bool = False) -> dict[str, Any]:
    """Start a cluster, run the driver on the client host, stop everything.

    ``workloads`` (default: every one ``sizes`` names) run in that order.
    ``pythonpath`` goes first on every host's PYTHONPATH (a patched
    distributed); ``gc_attribution`` runs the map once more with the garbage
    collector's garbage attributed (:mod:`asynciocomm_bench.gc.probe`).
    Returns the driver's result (``values`` per workload, ``errors``,
    ``loop_classes``, ``profile``) plus the cluster's shape.
    """
    tls = tls if is_tls(scheme) else None
    with ScaleCluster(scheme, loop, workers, hosts, workdir, tls, config=config,
                      start_timeout=bounds.start_timeout_s,
                      pythonpath={h: pythonpath for h in hosts} if pythonpath else None
                      ) as cluster:
        spec = {
            "scheduler_file": str(cluster.scheduler_file),
            "scheduler_pid": cluster.scheduler_pid,
            "worker_pids": cluster.worker_pids,
            "workers": workers,
            "wire": hosts["s"].netns is not None,
            "tls": tls is not None,
            "sizes": dataclasses.asdict(sizes),
            "workloads": sizes.names() if workloads is None else workloads,
            "timeout_s": bounds.workload_timeout_s,
            "start_timeout_s": bounds.start_timeout_s,
            "profile": profile,
            "gc_attribution": gc_attribution,
        }
        spec_file, out_file = workdir / "driver-spec.json", workdir / "driver-out.json"
        spec_file.write_text(json.dumps(spec))
        out_file.unlink(missing_ok=True)
        driver = cluster.spawn("c", "driver", ["-m", "asynciocomm_bench.scale.driver",
                                               str(spec_file), str(out_file)])
        deadline = time.monotonic() + bounds.driver_timeout(
            len(spec["workloads"]) + gc_attribution)
        while driver.poll() is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"driver did not finish in time: {cluster.log_tail('driver')}")
            cluster.check_alive()
            time.sleep(0.2)
        if not out_file.exists():
            raise RuntimeError(f"driver wrote nothing ({driver.returncode}): "
                               f"{cluster.log_tail('driver')}")
        out: dict[str, Any] = json.loads(out_file.read_text())
        if out["errors"]:
            out["scheduler_log"] = cluster.log_tail("scheduler", 10)
        out["hosts"] = {"scheduler": hosts["s"].address,
                        "workers": dict(zip(cluster.worker_hosts, cluster.per_host))}
        return out

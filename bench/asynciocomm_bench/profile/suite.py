"""``profile``: py-spy on the scheduler during a ``cluster`` workload.

For every scheme@loop and GC setting: a fresh cluster runs the wide
workload without the profiler, with ``py-spy record`` attached to the
scheduler (speedscope, 100 Hz, idle samples included), and without it
again; the profiled run's speedscope file is kept and analyzed by
``asynciocomm_bench.profile.speedscope``; the overhead is profiled/unprofiled wall and CPU.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from asynciocomm_bench.cluster import workloads
from asynciocomm_bench.cluster.procs import LocalCluster
from asynciocomm_bench.cluster.suite import make_client, run_workload, wait_workers
from asynciocomm_bench.common.loops import run_on_loop
from asynciocomm_bench.common.options import BenchError, ClusterBounds, is_tls
from asynciocomm_bench.common.progress import Bar
from asynciocomm_bench.common.tlsfiles import TLSFiles, make_tls_files
from asynciocomm_bench.profile import speedscope


def pyspy_path() -> str:
    """The py-spy executable, or a BenchError saying how to get it."""
    import sys

    cand = Path(sys.executable).parent / "py-spy"
    found = str(cand) if cand.exists() else shutil.which("py-spy")
    if not found:
        raise BenchError("py-spy is not installed (pip install -e ./bench)")
    return found


class PySpy:
    """A ``py-spy record`` subprocess on one PID, stopped with SIGINT by PID."""

    def __init__(self, pid: int, output: Path, rate: int = 100, max_s: float = 300,
                 nonblocking: bool = True, native: bool = False) -> None:
        args = [pyspy_path(), "record", "--pid", str(pid), "--format", "speedscope",
                "--rate", str(rate), "--output", str(output), "--duration",
                str(int(max_s)), "--idle", "--full-filenames"]
        if nonblocking and not native:  # py-spy must pause the process to unwind
            args.append("--nonblocking")
        if native:
            args.append("--native")
        self.output = output
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10  # let it attach before the workload
        while "Sampling" not in self.log() and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"py-spy exited at once: {self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        """py-spy's output so far."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def stop(self, timeout: float = 60) -> None:
        """SIGINT (py-spy then writes its file), bounded wait, kill as last resort."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if not self.output.exists():
            raise RuntimeError(f"py-spy wrote no file: {self.log()}")


def profile_one(scheme: str, loop: str, gc_on: bool, n: int, bounds: ClusterBounds,
                tls: TLSFiles | None, workdir: Path, outfile: Path,
                nonblocking: bool, native: bool, bar: Bar) -> dict[str, Any]:
    """One profiled configuration: unprofiled, profiled, unprofiled runs."""
    wl = workloads.wide(n)
    with LocalCluster(scheme, loop, bounds.workers, bounds.threads, workdir,
                      tls if is_tls(scheme) else None) as cluster:
        async def main() -> dict[str, Any]:
            client = await make_client(cluster, tls)
            try:
                await wait_workers(client, bounds.workers)
                t = bounds.workload_timeout_s
                await run_workload(client, cluster, workloads.wide(min(n, 2000)), gc_on, t)
                plain = [await run_workload(client, cluster, wl, gc_on, t)]
                bar.advance()
                spy = PySpy(cluster.scheduler_pid, outfile, max_s=t + 30,
                            nonblocking=nonblocking, native=native)
                try:
                    profiled = await run_workload(client, cluster, wl, gc_on, t)
                finally:
                    spy.stop()
                bar.advance()
                plain.append(await run_workload(client, cluster, wl, gc_on, t))
                bar.advance()
                return {"plain": plain, "profiled": profiled,
                        "scheduler_loop": await client.run_on_scheduler(workloads.loop_class)}
            finally:
                await client.close()

        res = run_on_loop(main, loop)
    wall0 = sum(p["wall_s"] for p in res["plain"]) / len(res["plain"])
    cpu0 = sum(p["sched_cpu_us"] for p in res["plain"]) / len(res["plain"])
    analysis = speedscope.analyze(speedscope.load(outfile))
    return {
        "config": f"{scheme}@{loop}", "scheme": scheme, "loop": loop, "gc": gc_on,
        "tasks": wl.ntasks, "speedscope": outfile.name,
        "scheduler_loop_class": res["scheduler_loop"],
        "samples": analysis["samples"], "thread": analysis["thread"],
        "shares": analysis["shares"],
        "update_graph_parts": analysis["update_graph_parts"],
        "comm_parts": analysis["comm_parts"],
        "overhead": {
            "wall_without_s": wall0, "wall_with_s": res["profiled"]["wall_s"],
            "wall_ratio": res["profiled"]["wall_s"] / wall0,
            "sched_cpu_us_without": cpu0,
            "sched_cpu_us_with": res["profiled"]["sched_cpu_us"],
            "cpu_ratio": res["profiled"]["sched_cpu_us"] / cpu0 if cpu0 else None,
        },
        "options": {"rate": 100, "nonblocking": nonblocking, "native": native,
                    "idle": True},
    }


def run_profile(schemes: list[str], loops: list[str], bounds: ClusterBounds,
                gcs: list[bool], n: int, outdir: Path, *, nonblocking: bool = True,
                native: bool = False, quiet: bool = False) -> dict[str, Any]:
    """Profile every scheme@loop × GC setting; returns the JSON section."""
    pyspy_path()
    outdir.mkdir(parents=True, exist_ok=True)
    configs = [(s, lp, g) for s in schemes for lp in loops for g in gcs]
    runs: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="asynciocomm-bench-profile-") as tmp:
        tls = make_tls_files(Path(tmp) / "tls") if any(is_tls(s) for s in schemes) else None
        with Bar(3 * len(configs), "profile", quiet) as bar:
            for scheme, loop, g in configs:
                tag = f"{scheme}@{loop}-gc{'on' if g else 'off'}"
                bar.describe(tag)
                out = outdir / f"speedscope-{tag.replace('+', '_').replace('@', '_')}.json"
                try:
                    runs.append(profile_one(scheme, loop, g, n, bounds, tls,
                                            Path(tmp) / tag, out, nonblocking, native, bar))
                except Exception as exc:
                    errors.append({"config": tag, "error": f"{type(exc).__name__}: {exc}"})
                    bar.log(f"profile {tag} failed: {str(exc)[:300]}", error=True)
    return {"runs": runs, "errors": errors, "categories": list(speedscope.CATEGORIES)}

"""A distributed tree with an upstream draft applied, for the cluster's PYTHONPATH.

The bench measures the draft as it would ship: the sdist of the installed
distributed release is extracted, the draft is applied with ``git apply``, and
that tree is put first on the PYTHONPATH of every process of the cluster
(scheduler and workers). Nothing is patched at run time; the client, in the
bench's own process, keeps the installed distributed. The tree must be the
installed release, or the comparison would be of two versions.
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

from asynciocomm_bench.common import sdist
from asynciocomm_bench.common.options import BenchError

#: The draft that removes BatchedSend's per-timeout cycle.
DRAFT = sdist.PATCHES / "0011-batched-send-no-timeout-cycle.patch"


def patched_tree(dest: Path, patch: Path = DRAFT) -> Path:
    """Extract the installed release's sdist into ``dest`` and apply ``patch``;
    returns the directory to put on PYTHONPATH."""
    import distributed

    version = distributed.__version__
    path, how = sdist.fetch(version)
    if path is None:
        raise BenchError(f"gc --draft needs the distributed {version} sdist: {how}")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path) as tf:
        tf.extractall(dest, filter="data")
    tree = dest / f"distributed-{version}"
    proc = subprocess.run(["git", "apply", "-p1", str(patch)], cwd=tree,
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise BenchError(f"{patch.name} does not apply to distributed {version}: "
                         f"{proc.stderr.strip()[:500]}")
    return tree

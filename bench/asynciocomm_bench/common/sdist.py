"""The sdist of a distributed release: from the environment, the cache or PyPI.

``patches/`` are drafts against distributed's sources, so what applies them (the
patch tests, the scale bench's multi-homed check) needs the release's sdist. It is
taken from ``$ASYNCIOCOMM_DISTRIBUTED_SDIST`` (a path to the .tar.gz), else from
the cache directory (``$ASYNCIOCOMM_CACHE_DIR``, default
``~/.cache/asynciocomm``), else downloaded from PyPI into that cache.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

#: The checkout's ``patches/`` (beside ``bench/``): the drafts are not installed,
#: so what applies them runs from a checkout.
PATCHES = Path(__file__).resolve().parents[3] / "patches"
#: Seconds ``pip download`` of one sdist may take (about 1.5 MB).
DOWNLOAD_TIMEOUT_S = 300


def cache_dir() -> Path:
    """Where downloaded sdists are kept."""
    if os.environ.get("ASYNCIOCOMM_CACHE_DIR"):
        return Path(os.environ["ASYNCIOCOMM_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "asynciocomm"


def pypi_reachable() -> bool:
    """Whether PyPI's index and file hosts both accept a connection (5 s each)."""
    for host in ("pypi.org", "files.pythonhosted.org"):
        try:
            with socket.create_connection((host, 443), timeout=5):
                pass
        except OSError:
            return False
    return True


#: How :func:`fetch`'s reason begins when only a reachable PyPI could have helped.
UNREACHABLE = "PyPI cannot be reached"


def fetch(version: str) -> tuple[Path | None, str]:
    """The sdist of distributed ``version`` and how it was found, or None and why not."""
    if os.environ.get("ASYNCIOCOMM_DISTRIBUTED_SDIST"):
        env = Path(os.environ["ASYNCIOCOMM_DISTRIBUTED_SDIST"])
        return (env, "from $ASYNCIOCOMM_DISTRIBUTED_SDIST") if env.is_file() else (
            None, f"ASYNCIOCOMM_DISTRIBUTED_SDIST={env} does not exist")
    path = cache_dir() / f"distributed-{version}.tar.gz"
    if path.is_file():
        return path, "cached"
    if not pypi_reachable():
        return None, f"{UNREACHABLE} and {path} is not cached"
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         f"distributed=={version}", "-d", str(path.parent)],
        capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    if proc.returncode != 0 or not path.is_file():
        return None, f"pip download failed: {(proc.stdout + proc.stderr)[-500:]}"
    return path, "downloaded from PyPI"

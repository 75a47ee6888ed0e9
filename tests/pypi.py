"""What the tests that install from PyPI share: where their environments are kept,
and whether PyPI can be reached at all."""

from __future__ import annotations

import os
import socket
from pathlib import Path

#: How a skip's reason begins when only a reachable PyPI could have helped.
UNREACHABLE = "PyPI cannot be reached"


def cache_dir() -> Path:
    """``$ASYNCIOCOMM_CACHE_DIR``, else ``asynciocomm`` in the user's cache directory:
    the one the bench keeps distributed's sdists in too."""
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

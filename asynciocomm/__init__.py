"""asynciocomm: an asyncio/uvloop comm backend for Dask distributed.

Schemes ``asyncio://`` and ``asyncio+tls://`` are available after installation
(``distributed.comm.backends`` entry points). :func:`install` makes ``tcp://`` and
``tls://`` use this transport in the current process.
"""

from __future__ import annotations

from asynciocomm import config as _config  # noqa: F401  (loads the YAML defaults)
from asynciocomm.takeover import install, installed, uninstall

__version__ = "0.1.0"
__all__ = ["install", "installed", "uninstall", "__version__"]

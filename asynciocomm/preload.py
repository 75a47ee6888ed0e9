"""Dask preload module: ``--preload asynciocomm.preload`` (or the ``preload``
config of the scheduler, worker or nanny) makes tcp:// and tls:// use asynciocomm.

Importing this module installs the takeover, before the server opens its
listener; ``dask_setup`` is there because distributed's preload protocol calls it.
"""

from __future__ import annotations

from typing import Any

from asynciocomm.takeover import install

install()


def dask_setup(server: Any) -> None:
    """Nothing left to do: the takeover happened at import."""

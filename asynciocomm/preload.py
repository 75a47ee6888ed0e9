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
    """Install again (idempotent): a process that called ``uninstall()`` since
    the import gets the takeover back for the comms it opens from now on."""
    install()

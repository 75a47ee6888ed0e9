"""Taking over ``tcp://`` and ``tls://`` in the current process.

distributed's registry consults its ``backends`` dict before any entry point, and
importing ``distributed.comm`` fills ``tcp`` and ``tls`` with the Tornado comm, so a
takeover must overwrite those entries explicitly. The wire format is the stock
one, so a process that took over still talks to processes that did not.
"""

from __future__ import annotations

from distributed.comm.registry import Backend, backends

from asynciocomm.backend import TakeoverBackend, takeover_backend

_saved: dict[str, Backend] = {}


def install() -> None:
    """Serve ``tcp://`` and ``tls://`` with asynciocomm in this process.

    Idempotent. Affects comms and listeners created afterwards.
    """
    for scheme, encrypted in (("tcp", False), ("tls", True)):
        current = backends.get(scheme)
        if isinstance(current, TakeoverBackend):
            continue
        if current is not None:
            _saved[scheme] = current
        backends[scheme] = takeover_backend(encrypted)


def uninstall() -> None:
    """Give ``tcp://`` and ``tls://`` back to the backends they had before."""
    for scheme in ("tcp", "tls"):
        if isinstance(backends.get(scheme), TakeoverBackend):
            if scheme in _saved:
                backends[scheme] = _saved.pop(scheme)
            else:
                del backends[scheme]


def installed() -> bool:
    """Whether ``tcp://`` is currently served by asynciocomm."""
    return isinstance(backends.get("tcp"), TakeoverBackend)

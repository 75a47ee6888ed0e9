"""Which event loop an object belongs to."""

from __future__ import annotations


def of_uvloop(obj: object) -> bool:
    """Whether ``obj`` (an event loop or a transport) is uvloop's. uvloop's
    classes implement asyncio's interfaces without subclassing them, so this
    is told by the class's module."""
    return type(obj).__module__.startswith("uvloop")

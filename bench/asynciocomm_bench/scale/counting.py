"""A scheduler preload that counts what the scheduler's comms read and write.

``dask scheduler --preload asynciocomm_bench.scale.counting`` wraps ``read`` and ``write``
of every comm class the process can use, stock (``distributed.comm.tcp.TCP``,
which ``TLS`` inherits) and asynciocomm's (``AsyncioComm``, which serves
``asyncio://``, ``asyncio+tls://`` and the takeover of ``tcp://``), with the
same wrapper, so both comms pay the same for being counted. Per call it counts
one comm read or write, the messages in it (a batched stream sends a list of
messages in one write) and, for writes, the bytes ``write`` returns: the
frames' total length, header included, which is the same for both comms
because their wire bytes are. Reading gives no byte count in the Comm API;
the scale bench takes the bytes read from the scheduler host's interface.

``snapshot`` (run on the scheduler with ``run_on_scheduler``) returns the totals.
"""

from __future__ import annotations

from typing import Any

from asynciocomm_bench.scale.lifeline import die_with_parent

COUNTS: dict[str, int] = {"reads": 0, "read_msgs": 0, "writes": 0, "write_msgs": 0,
                          "write_bytes": 0}
_WRAPPED = "_bench_scale_counted"
_ORIGINAL: dict[type, tuple[Any, Any]] = {}


def _wrap(cls: type) -> None:
    orig_read, orig_write = cls.read, cls.write  # type: ignore[attr-defined]
    if getattr(orig_read, _WRAPPED, False):
        return
    counts = COUNTS
    _ORIGINAL[cls] = (orig_read, orig_write)

    async def read(self: Any, deserializers: Any = None) -> Any:
        msg = await orig_read(self, deserializers)
        counts["reads"] += 1
        counts["read_msgs"] += len(msg) if type(msg) in (list, tuple) else 1
        return msg

    async def write(self: Any, msg: Any, serializers: Any = None,
                    on_error: str | None = "message") -> int:
        n = await orig_write(self, msg, serializers, on_error)
        counts["writes"] += 1
        counts["write_msgs"] += len(msg) if type(msg) in (list, tuple) else 1
        counts["write_bytes"] += n or 0
        return n

    for fn, orig in ((read, orig_read), (write, orig_write)):
        fn.__qualname__ = orig.__qualname__
        fn.__doc__ = orig.__doc__
        setattr(fn, _WRAPPED, True)
    cls.read, cls.write = read, write  # type: ignore[attr-defined]


def comm_classes() -> list[type]:
    """The comm classes of this process: stock tcp (and tls), asynciocomm's."""
    from distributed.comm.tcp import TCP

    classes: list[type] = [TCP]
    try:
        from asynciocomm.comm import AsyncioComm
    except ImportError:
        pass
    else:
        classes.append(AsyncioComm)
    return classes


def install() -> None:
    """Wrap every comm class (once)."""
    for cls in comm_classes():
        _wrap(cls)


def uninstall() -> None:
    """Give every wrapped class its own ``read`` and ``write`` back."""
    for cls, (read, write) in _ORIGINAL.items():
        cls.read, cls.write = read, write  # type: ignore[attr-defined]
    _ORIGINAL.clear()


def reset() -> None:
    """Set every count back to zero."""
    for k in COUNTS:
        COUNTS[k] = 0


def snapshot() -> dict[str, int]:
    """The counts so far."""
    return dict(COUNTS)


def dask_setup(scheduler: Any) -> None:
    """The preload hook: count from before the scheduler opens any comm."""
    die_with_parent()
    install()

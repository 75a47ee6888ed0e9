"""A process in which some private names of dask and distributed are missing, or
changed, when asynciocomm looks them up; it reports what asynciocomm made of it.

``python -m tests.helpers_hidden SPEC`` where SPEC is JSON: a list of
``"module:attr"`` to hide, or ``"module:attr=changed"`` to replace with an object
whose attributes have another shape. Each is hidden only while
``asynciocomm.serialization.internals`` is imported (a copy of the module stands in
``sys.modules`` meanwhile), so dask and distributed themselves keep working,
as on a release that lacks the name. The last line printed is a JSON report:
the names asynciocomm found missing, the codec comms get, which fast paths are
on, the WARNING records logged, the self-check's result, and whether messages
went through a real ``asyncio://`` connection intact.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import logging
import sys
import types
from typing import Any

import distributed  # noqa: F401  (imported first, as in any user of asynciocomm)
import numpy  # noqa: F401  (the NumPy fast paths arm only once it is loaded)


class _Changed:
    """An object where a dict, a ContextVar or a class was expected."""

    _lookup: list[Any] = []
    _lazy: list[Any] = []
    _callbacks: list[Any] = []


def _hidden(spec: list[str]) -> dict[str, Any]:
    """Stand-in copies of the modules named in ``spec``, by module name."""
    fakes: dict[str, Any] = {}
    for item in spec:
        where, _, how = item.partition("=")
        module_name, _, attr = where.partition(":")
        real = importlib.import_module(module_name)
        fake = fakes.get(module_name)
        if fake is None:
            fake = fakes[module_name] = types.ModuleType(module_name)
            fake.__dict__.update(vars(real))
        if how == "changed":
            setattr(fake, attr, _Changed())
        else:
            delattr(fake, attr)
    return fakes


async def _round_trip() -> bool:
    from distributed.comm import connect, listen
    from distributed.protocol import dumps, loads

    from asynciocomm.serialization import selfcheck

    messages = selfcheck.canonical_messages(numpy)
    received: list[Any] = []

    async def handle(comm: Any) -> None:
        for _ in messages:
            received.append(await comm.read())
        await comm.write("done")
        await comm.close()

    listener = listen("asyncio://127.0.0.1:0", handle)
    await listener.start()
    try:
        comm = await connect(listener.contact_address, timeout=30)
        for _, make in messages:
            await comm.write(make())
        assert await asyncio.wait_for(comm.read(), 30) == "done"
        await comm.close()
    finally:
        listener.stop()
    expected = [loads(dumps(make())) for _, make in messages]  # as distributed reads them
    return len(received) == len(messages) and all(map(selfcheck._same, received, expected))


def main(spec: list[str]) -> dict[str, Any]:
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                records.append(record.getMessage())

    logging.getLogger("distributed.comm.asyncio").addHandler(Collect())
    # The package is created without running its __init__ (which imports every
    # module, internals among them), so that only internals sees the stand-ins.
    package_spec = importlib.util.find_spec("asynciocomm")
    assert package_spec is not None and package_spec.loader is not None
    package = importlib.util.module_from_spec(package_spec)
    sys.modules["asynciocomm"] = package
    fakes = _hidden(spec)
    saved = {name: sys.modules[name] for name in fakes}
    sys.modules.update(fakes)
    try:
        from asynciocomm.serialization import internals
    finally:
        sys.modules.update(saved)
    package_spec.loader.exec_module(package)

    from asynciocomm import framing
    from asynciocomm.serialization import arrays, metering, pickling, selfcheck, sizing
    from asynciocomm.serialization import choice as codecs
    from asynciocomm.serialization.fast import MessageCodec

    arrays._arm()
    return {
        "missing": sorted(internals.MISSING),
        "codec": codecs.decided()[0].__name__,
        "on": {
            "by_value": bool(pickling._SKIPPABLE),
            "pickle_steps": bool(pickling._STEPS),
            "meters": metering.SUPPORTED,
            "sizing": sizing._LOOKUP is not None and sizing._DICT is not None,
            "array_write": arrays._Fast.serialize is not None,
            "array_read": arrays._Fast.deserialize is not None,
        },
        "warnings": records,
        "release": selfcheck.release(),
        "differences": [selfcheck.differences(MessageCodec), framing.difference()],
        "round_trip": asyncio.run(_round_trip()),
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))

"""``python -m tests.peers.server SPEC``: a listener in its own process for
:class:`tests.peers.procs.ListenerProcess` (so its memory can be read from /proc).

SPEC is JSON: scheme, loop, tls (ca/cert/key or null), config (dask config
overrides). Prints ``{"address": ...}`` once listening; serves
:func:`tests.peers.soak.soak_handler` until SIGTERM or until stdin closes.
Errors are logged to stderr.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading

import dask


def main() -> None:
    spec = json.loads(sys.argv[1])
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(name)s %(levelname)s %(message)s")
    logging.getLogger("distributed").setLevel(logging.INFO)
    dask.config.set(spec.get("config") or {})
    import asynciocomm  # noqa: F401  (config defaults)
    from tests.peers.conn import TLSSpec, serve
    from tests.peers.loops import run_on_loop
    from tests.peers.soak import soak_handler

    tls = TLSSpec(**spec["tls"]) if spec.get("tls") else None

    def watch_stdin() -> None:  # the parent went away: exit
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()

    async def run() -> None:
        security = tls.security() if tls else None
        async with serve(spec["scheme"], soak_handler, security) as listener:
            print(json.dumps({"address": listener.contact_address}), flush=True)
            await asyncio.Event().wait()

    run_on_loop(run, spec["loop"])


if __name__ == "__main__":
    main()

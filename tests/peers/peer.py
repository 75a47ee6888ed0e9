"""``python -m tests.peers.peer SPEC``: a peer process for the SIGKILL faults of
:class:`tests.peers.procs.PeerProcess`.

SPEC is JSON: mode ("write": send messages of ``size`` bytes back to back;
"read": read everything), address, size, tls. Prints ``ready`` once the first
message has gone out (write) or come in (read), then carries on until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys


def main() -> None:
    spec = json.loads(sys.argv[1])
    import numpy as np
    from distributed.comm import connect
    from distributed.protocol import to_serialize

    import asynciocomm  # noqa: F401
    from tests.peers.conn import TLSSpec, connect_args
    from tests.peers.loops import run_on_loop

    tls = TLSSpec(**spec["tls"]) if spec.get("tls") else None
    import os

    loop = os.environ.get("DASK_DISTRIBUTED__ADMIN__EVENT_LOOP", "asyncio")

    async def run() -> None:
        comm = await connect(spec["address"], timeout=30,
                             **connect_args(tls.security() if tls else None))
        if spec["mode"] == "write":
            data = np.ones(spec["size"], dtype="u1")
            i = 0
            while True:
                await comm.write({"op": "big", "i": i, "data": to_serialize(data)})
                if i == 0:
                    print("ready", flush=True)
                i += 1
        else:
            await comm.write({"op": "send-me"})
            i = 0
            while True:
                await comm.read()
                if i == 0:
                    print("ready", flush=True)
                i += 1
                await asyncio.sleep(0.01)

    run_on_loop(run, loop)


if __name__ == "__main__":
    main()

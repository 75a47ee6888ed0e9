"""The server process of ``comm``: one fresh process per configuration.

Run as ``python -m asynciocomm_bench.comm.server '<json spec>'``. It prints one JSON
line (address, loop class, pid) once listening, then answers commands read
from stdin: ``rusage`` prints the process CPU seconds and minor page faults
(RUSAGE_SELF, all threads) and the CPU seconds of the event-loop (main) thread
alone, ``stop`` ends it.

With the spec's ``cpu_thread`` a pure-Python CPU-bound thread runs beside the
server, as a worker's task threads do, so that GIL hand-offs show up in the
measurements.
"""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import sys
import threading
import time
from typing import Any

from asynciocomm_bench.comm import rawproto


def _thread_cpu(ident: int | None) -> float:
    """CPU seconds of one thread of this process (0.0 if it is not running)."""
    if ident is None:
        return 0.0
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ProcessLookupError):
        return 0.0


def _usage() -> dict[str, float]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": ru.ru_utime + ru.ru_stime, "minflt": ru.ru_minflt,
            "loop_cpu": _thread_cpu(threading.main_thread().ident)}


#: Seconds the CPU-bound thread runs at most: far longer than one
#: configuration's server process lives (it is a daemon and ends with it).
CPU_THREAD_MAX_S = 3600.0


def _start_cpu_thread() -> threading.Thread:
    """A pure-Python CPU-bound thread: it holds the GIL but for the
    interpreter's forced switches, as a worker's task threads do."""
    def burn() -> None:
        x = 0
        end = time.monotonic() + CPU_THREAD_MAX_S
        while time.monotonic() < end:
            for i in range(1000):
                x = (x + i * i) % 1_000_003

    t = threading.Thread(target=burn, daemon=True, name="bench-cpu")
    t.start()
    return t


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _command_thread(on_stop: Any) -> threading.Thread:
    def run() -> None:
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "rusage":
                _emit(_usage())
            elif cmd == "stop":
                break
        on_stop()

    t = threading.Thread(target=run, daemon=True, name="bench-cmd")
    t.start()
    return t


def _ssl_context(spec: dict[str, Any]) -> Any:
    if not spec.get("tls"):
        return None
    from asynciocomm_bench.common.tlsfiles import TLSFiles

    return TLSFiles(**spec["tls"]).security().get_listen_args("scheduler")["ssl_context"]


async def _handle_comm(comm: Any) -> None:
    from distributed.comm.core import CommClosedError

    count = 0
    try:
        while True:
            msg = await comm.read()
            op = msg["op"]
            if op == "ping":
                await comm.write(msg)
            elif op == "s":
                count += 1
            elif op == "sync":
                await comm.write({"op": "sync", "n": count})
                count = 0
            elif op == "bye":
                break
    except (CommClosedError, OSError):
        pass
    finally:
        await comm.close()


async def _serve_async(spec: dict[str, Any]) -> None:
    from asynciocomm_bench.common.loops import running_loop_class

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    _command_thread(lambda: loop.call_soon_threadsafe(stop.set))
    if spec["kind"] == "comm":
        from distributed.comm import listen

        args: dict[str, Any] = {}
        if spec.get("tls"):
            from asynciocomm_bench.common.tlsfiles import TLSFiles

            args = TLSFiles(**spec["tls"]).security().get_listen_args("scheduler")
        listener = listen(f"{spec['scheme']}://127.0.0.1:0", _handle_comm,
                          deserialize=True, **args)
        await listener.start()
        address = listener.contact_address
        closer = listener.stop
    else:  # rawaio / rawtask / rawkeep: the bare protocol references
        factory: Any = (rawproto.RawKeepServerProtocol if spec.get("keep")
                        else rawproto.RawTaskServerProtocol if spec.get("task")
                        else rawproto.RawServerProtocol)
        server = await loop.create_server(factory, "127.0.0.1", 0,
                                          ssl=_ssl_context(spec))
        port = server.sockets[0].getsockname()[1]
        address = f"127.0.0.1:{port}"
        closer = server.close
    _emit({"address": address, "loop_class": running_loop_class(), "pid": _pid()})
    await stop.wait()
    closer()


def _pid() -> int:
    import os

    return os.getpid()


def _recv_exact(sock: socket.socket, view: memoryview) -> bool:
    while len(view):
        n = sock.recv_into(view)
        if not n:
            return False
        view = view[n:]
    return True


def _serve_rawsock(spec: dict[str, Any]) -> None:
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    ctx = _ssl_context(spec)
    lsock.settimeout(0.2)
    stopped = threading.Event()
    _command_thread(stopped.set)
    _emit({"address": f"127.0.0.1:{lsock.getsockname()[1]}", "loop_class": None,
           "pid": _pid()})
    hdr = bytearray(rawproto.HDR.size)
    buf = bytearray(1 << 20)
    while not stopped.is_set():
        try:
            conn, _ = lsock.accept()
        except (socket.timeout, TimeoutError):
            continue
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ctx is not None:
            conn = ctx.wrap_socket(conn, server_side=True)
        count = 0
        try:
            while _recv_exact(conn, memoryview(hdr)):
                length, op = rawproto.HDR.unpack(hdr)
                if length > len(buf):
                    buf = bytearray(length)
                if length and not _recv_exact(conn, memoryview(buf)[:length]):
                    break
                if op == rawproto.PING:
                    conn.sendall(hdr + memoryview(buf)[:length])
                elif op == rawproto.SINK:
                    count += 1
                elif op == rawproto.SYNC:
                    conn.sendall(rawproto.HDR.pack(count, rawproto.SYNC))
                    count = 0
                else:
                    break
        except OSError:
            pass
        finally:
            conn.close()
    lsock.close()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the server process."""
    spec = json.loads((argv or sys.argv[1:])[0])
    if spec.get("cpu_thread"):
        _start_cpu_thread()
    if spec["kind"] == "rawsock":
        _serve_rawsock(spec)
        return
    from asynciocomm_bench.common.loops import run_on_loop

    run_on_loop(lambda: _serve_async(spec), spec["loop"])


if __name__ == "__main__":
    main()

"""Reliability scenarios shared by ``tests/reliability`` and ``asynciocomm-bench
reliability``: hostile inputs, raw peers, a listener subprocess whose memory can be
read from ``/proc``, the checksummed integrity soak and descriptor counting.

Everything runs on real loopback sockets against real listeners; every wait has a
bound (a hang is reported as a failure, never blocks). Works for any scheme that
``distributed.comm`` knows: ``asyncio``, ``asyncio+tls``, stock ``tcp``/``tls``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import os
import random
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

#: Upper bound of any single wait.
WAIT = 30.0

U64 = struct.Struct("<Q")


def is_tls(scheme: str) -> bool:
    return scheme in ("tls", "asyncio+tls") or scheme.endswith("+tls")


# -- hostile inputs -------------------------------------------------------------------


def header(prefix: int, lengths: list[int]) -> bytes:
    """Raw frame header: prefix, nframes, lengths (little-endian u64)."""
    return struct.pack(f"<QQ{len(lengths)}Q", prefix, len(lengths), *lengths)


@dataclass(frozen=True)
class Hostile:
    """One hostile input. ``invalid``: a correct reader must abort the connection
    on it (as opposed to waiting for more bytes that will never come)."""

    name: str
    data: bytes
    invalid: bool = True
    claim: int = 0  # bytes the input claims a message needs (0: none)


def hostile_inputs() -> list[Hostile]:
    """The table of hostile inputs (sent as the listener's handshake read)."""
    rnd = random.Random(5)
    return [
        Hostile("random-bytes-4KiB", rnd.randbytes(4096)),
        Hostile("random-bytes-64KiB", rnd.randbytes(65536)),
        Hostile("prefix-2^63", header(2**63, [8]) + b"x" * 8, claim=2**63),
        Hostile("prefix-2^40", header(2**40, [2**40 - 16]), claim=2**40),
        Hostile("nframes-2^63", U64.pack(16) + U64.pack(2**63), claim=2**66),
        Hostile("nframes-2^40", U64.pack(16) + U64.pack(2**40), claim=2**43),
        Hostile("nframes-2^64-1", U64.pack(16) + U64.pack(2**64 - 1), claim=2**67),
        Hostile("framesize-2^63", header(16, [2**63]), claim=2**63),
        Hostile("framesize-2^40", header(16, [2**40]) + b"z" * 4096, claim=2**40),
        Hostile("framesizes-sum-2^64", header(24, [2**63, 2**63]), claim=2**64),
        Hostile("zero-frames", header(8, [])),
        Hostile("prefix-mid-frame", header(24 + 5, [10, 10]) + b"a" * 20),
        # Incomplete but not (yet) invalid: the peer then closes its side.
        Hostile("header-ends-mid-field", header(24, [5])[:12], invalid=False),
        Hostile("header-ends-mid-lengths", header(32, [5, 6, 7])[:30], invalid=False),
        Hostile("truncated-mid-frame", header(16, [1 << 20]) + b"f" * 4096,
                invalid=False, claim=1 << 20),
    ]  # fmt: skip


#: Claims of 2^40 .. 2^63 bytes, for the peak-RSS measurement.
HUGE_CLAIMS = [
    h for h in hostile_inputs() if h.claim >= 2**40
]


# -- raw peers -------------------------------------------------------------------------


def host_port(address: str) -> tuple[str, int]:
    from distributed.comm.addressing import get_address_host_port

    return get_address_host_port(address)


def client_ssl_context(security: Any) -> ssl.SSLContext:
    """The client SSLContext distributed would use with ``security``."""
    return security.get_connection_args("client")["ssl_context"]


class RawPeer:
    """An asyncio stream to a listener: plain TCP, or TLS with ``ssl_context``.
    Sends whatever it is told; knows nothing of the framing."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(
        cls, address: str, ssl_context: ssl.SSLContext | None = None, timeout: float = WAIT
    ) -> RawPeer:
        host, port = host_port(address)
        kw: dict[str, Any] = {}
        if ssl_context is not None:
            kw = {"ssl": ssl_context, "server_hostname": host}
        r, w = await asyncio.wait_for(asyncio.open_connection(host, port, **kw), timeout)
        return cls(r, w)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await asyncio.wait_for(self.writer.drain(), WAIT)

    async def trickle(self, data: bytes, interval: float) -> str | None:
        """Send one byte every ``interval`` seconds; stop early (returning how the
        connection ended) if the listener drops it."""
        for i in range(len(data)):
            try:
                await self.send(data[i : i + 1])
            except (ConnectionError, OSError, ssl.SSLError):
                return "reset"
            if self.reader.at_eof():
                return "eof"
            await asyncio.sleep(interval)
        return None

    def shutdown_write(self) -> None:
        if self.writer.can_write_eof():
            self.writer.write_eof()
        else:  # TLS: no half-close; shut the socket down under it
            sock = self.writer.get_extra_info("socket")
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)

    async def wait_closed_by_peer(self, timeout: float = WAIT) -> str:
        """'eof' or 'reset' once the listener drops us; 'open' after ``timeout``."""

        async def drain() -> str:
            while True:
                try:
                    data = await self.reader.read(1 << 16)
                except (ConnectionError, ssl.SSLError, OSError):
                    return "reset"
                if not data:
                    return "eof"

        try:
            return await asyncio.wait_for(drain(), timeout)
        except asyncio.TimeoutError:
            return "open"

    def abort(self) -> None:
        """Close with SO_LINGER 0: the peer sees a reset."""
        sock = self.writer.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def close(self) -> None:
        self.writer.transport.abort() if self.writer.transport.is_closing() else self.writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.writer.wait_closed(), 5)


def open_idle_sockets(address: str, n: int) -> list[socket.socket]:
    """``n`` plain TCP connections that never send a byte (half-open handshakes)."""
    host, port = host_port(address)
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.create_connection((host, port), timeout=WAIT)
            s.setblocking(False)
            socks.append(s)
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


def socket_state(sock: socket.socket) -> str:
    """'open', 'eof' or 'reset' for a non-blocking socket, without waiting."""
    for _ in range(1000):  # drain what the listener sent (its handshake)
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return "open"
        except (ConnectionResetError, OSError):
            return "reset"
        if not data:
            return "eof"
    return "open"


# -- well-behaved clients --------------------------------------------------------------


async def roundtrip(address: str, connect_args: dict[str, Any], n: int = 3) -> None:
    """Connect, exchange ``n`` messages with an echo server, close."""
    from distributed.comm import connect

    comm = await asyncio.wait_for(connect(address, timeout=WAIT, **connect_args), WAIT)
    try:
        for i in range(n):
            msg = {"op": "ping", "i": i, "payload": b"x" * 1000}
            await asyncio.wait_for(comm.write(msg), WAIT)
            got = await asyncio.wait_for(comm.read(), WAIT)
            assert got == msg, got
    finally:
        await asyncio.wait_for(comm.close(), WAIT)


async def echo(comm: Any) -> None:
    """Echo every message until the peer goes away."""
    try:
        while True:
            await comm.write(await comm.read())
    except OSError:
        pass
    finally:
        comm.abort()


# -- integrity soak --------------------------------------------------------------------


def digest(seq: int, cid: int, payload_bytes: bytes | memoryview) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(struct.pack("<QQ", seq, cid))
    h.update(payload_bytes)
    return h.hexdigest()


_ARRAYS: dict[int, Any] = {}


def _array(nbytes: int, rng: random.Random) -> Any:
    """A uint8 array of ``nbytes`` random bytes (a rolled copy of a cached block,
    so that gigabytes of payload cost little CPU to make)."""
    import numpy as np

    base = _ARRAYS.get(nbytes)
    if base is None:
        base = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
        if nbytes >= 1 << 20:
            _ARRAYS.clear()  # keep one large block at a time
        _ARRAYS[nbytes] = base
    shift = rng.randrange(max(nbytes, 1))
    return np.roll(base, shift) if nbytes else base.copy()


def _canonical(obj: Any) -> Any:
    """Lists and tuples alike (msgpack gives tuples back for lists)."""
    if isinstance(obj, dict):
        return {k: _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    return obj


def payload_bytes(kind: str, payload: Any) -> bytes | memoryview:
    if kind == "array":
        import numpy as np

        return memoryview(np.ascontiguousarray(payload)).cast("B")
    if kind == "dict":
        return repr(_canonical(payload)).encode()
    return bytes(payload)


def make_message(seq: int, cid: int, rng: random.Random, max_size: int) -> dict[str, Any]:
    """A message of a random shape and size with its checksum."""
    from distributed.protocol import to_serialize

    r = rng.random()
    if r < 0.1:
        kind, payload = "bytes", b""
    elif r < 0.35:
        kind, payload = "bytes", rng.randbytes(rng.randrange(1, 256))
    elif r < 0.55:
        kind = "dict"
        payload = {
            f"k{i}": [rng.randrange(2**31), rng.randbytes(rng.randrange(64)).hex(),
                      rng.randbytes(rng.randrange(512))]
            for i in range(rng.randrange(1, 20))
        }  # fmt: skip
    elif r < 0.7:
        kind, payload = "bytes", rng.randbytes(rng.randrange(256, 256 * 1024))
    else:
        kind = "array"
        # log-uniform between 0 and max_size
        nbytes = 0 if rng.random() < 0.05 else int(2 ** rng.uniform(0, max(1, max_size).bit_length() - 1))
        nbytes = min(nbytes, max_size)
        payload = _array(nbytes, rng)
    d = digest(seq, cid, payload_bytes(kind, payload))
    wire = to_serialize(payload) if kind == "array" else payload
    return {"op": "soak", "seq": seq, "cid": cid, "kind": kind, "digest": d, "payload": wire}


def check_message(msg: dict[str, Any], seq: int, cid: int) -> str | None:
    """None if ``msg`` is message ``seq`` of comm ``cid`` intact, else what is wrong."""
    if msg.get("cid") != cid:
        return f"wrong comm {msg.get('cid')} != {cid}"
    if msg.get("seq") != seq:
        return f"out of order: got seq {msg.get('seq')}, expected {seq}"
    got = digest(seq, cid, payload_bytes(msg["kind"], msg["payload"]))
    if got != msg["digest"]:
        return f"corrupted: seq {seq} of comm {cid}"
    return None


def message_nbytes(msg: dict[str, Any]) -> int:
    payload = msg["payload"]
    payload = getattr(payload, "data", payload)  # to_serialize() wrapper on the way out
    return len(payload_bytes(msg["kind"], payload))


async def soak_handler(comm: Any) -> None:
    """Server side of the soak. Messages with ``op == 'soak'`` are verified and
    echoed; ``{'op': 'burst', ...}`` makes it write ``n`` checksummed messages and
    close at once (every byte must still arrive)."""
    from distributed.comm.core import CommClosedError

    expected = 0
    try:
        while True:
            msg = await comm.read()
            op = msg.get("op")
            if op == "soak":
                problem = check_message(msg, expected, msg.get("cid", -1))
                expected += 1
                if problem:
                    msg = {"op": "error", "problem": f"server: {problem}"}
                await comm.write(msg)
            elif op == "burst":
                rng = random.Random(msg["seed"])
                for i in range(msg["n"]):
                    await comm.write(make_message(i, msg["cid"], rng, msg["max_size"]))
                await comm.close()  # right after the last write: nothing may be lost
                return
            elif op == "ping":
                await comm.write(msg)
    except CommClosedError:
        pass
    finally:
        comm.abort()


@dataclass
class SoakResult:
    comms: int = 0
    messages: int = 0
    bytes: int = 0
    largest: int = 0
    lost: int = 0
    reordered: int = 0
    corrupted: int = 0
    problems: list[str] = field(default_factory=list)

    def record(self, problem: str | None) -> None:
        if problem is None:
            return
        self.problems.append(problem)
        if "out of order" in problem:
            self.reordered += 1
        elif "lost" in problem:
            self.lost += 1
        else:
            self.corrupted += 1

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["problems"] = self.problems[:20]
        return d


async def soak(
    address: str,
    connect_args: dict[str, Any],
    *,
    comms: int,
    messages: int,
    max_size: int,
    seed: int = 0,
    burst: int = 0,
    window: int = 4,
    deadline: float = 600.0,
) -> SoakResult:
    """``comms`` concurrent comms each send ``messages`` checksummed messages to a
    :func:`soak_handler` (up to ``window`` in flight) and verify the echoes; then,
    with ``burst``, each asks for a burst of that many messages written right before
    the server's ``close()`` and verifies all of them arrive."""
    from distributed.comm import connect
    from distributed.comm.core import CommClosedError

    result = SoakResult(comms=comms)
    stop_at = time.monotonic() + deadline

    def left() -> float:
        return max(0.1, min(WAIT * 4, stop_at - time.monotonic()))

    async def one(cid: int) -> None:
        rng = random.Random(seed * 1000 + cid)
        comm = await asyncio.wait_for(connect(address, timeout=WAIT, **connect_args), WAIT)
        try:
            sent: list[int] = []

            async def writer() -> None:
                for seq in range(messages):
                    msg = make_message(seq, cid, rng, max_size)
                    sent.append(message_nbytes(msg))
                    await asyncio.wait_for(comm.write(msg), left())
                    await slots.acquire()

            slots = asyncio.Semaphore(window)
            w = asyncio.ensure_future(writer())
            try:
                for seq in range(messages):
                    try:
                        got = await asyncio.wait_for(comm.read(), left())
                    except CommClosedError as e:
                        result.record(f"lost: comm {cid} closed after {seq} messages: {e}")
                        result.lost += messages - seq - 1
                        return
                    slots.release()
                    if got.get("op") == "error":
                        result.record(got["problem"])
                        continue
                    result.record(check_message(got, seq, cid))
                    result.messages += 1
                    result.bytes += sent[seq] if seq < len(sent) else 0
                    result.largest = max(result.largest, sent[seq] if seq < len(sent) else 0)
                await asyncio.wait_for(w, left())
            finally:
                if not w.done():
                    w.cancel()
                    with contextlib.suppress(BaseException):
                        await w
        finally:
            await asyncio.wait_for(comm.close(), WAIT)
        if burst:
            comm = await asyncio.wait_for(connect(address, timeout=WAIT, **connect_args), WAIT)
            try:
                bseed = seed * 1000 + cid + 7
                await comm.write({"op": "burst", "n": burst, "cid": cid, "seed": bseed,
                                  "max_size": max_size})
                for seq in range(burst):
                    try:
                        got = await asyncio.wait_for(comm.read(), left())
                    except CommClosedError as e:
                        result.record(f"lost: burst of comm {cid}: {burst - seq} of "
                                      f"{burst} messages written before close(): {e}")
                        result.lost += burst - seq - 1
                        break
                    result.record(check_message(got, seq, cid))
                    result.messages += 1
                    result.bytes += message_nbytes(got)
                else:
                    # then the close itself
                    with contextlib.suppress(CommClosedError):
                        extra = await asyncio.wait_for(comm.read(), WAIT)
                        result.record(f"corrupted: unexpected message after burst: {extra!r:.80}")
            finally:
                comm.abort()

    await asyncio.wait_for(asyncio.gather(*(one(c) for c in range(comms))), deadline + WAIT)
    return result


# -- resources -------------------------------------------------------------------------


def fd_count(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """VmPeak, VmSize, VmHWM, VmRSS of a process, in bytes."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmPeak", "VmSize", "VmHWM", "VmRSS"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def reset_peak_rss(pid: int | str = "self") -> bool:
    """Reset VmHWM (Linux >= 4.0: write 5 to clear_refs). False if not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


async def connect_close_cycles(
    address: str, connect_args: dict[str, Any], n: int, concurrency: int = 8,
    deadline: float = 600.0,
) -> int:
    """Open and close ``n`` comms (``concurrency`` at a time); returns how many
    round-tripped a message. Each cycle: connect, handshake, one ping, close."""
    from distributed.comm import connect

    done = 0
    stop_at = time.monotonic() + deadline

    async def worker(k: int) -> None:
        nonlocal done
        for i in range(k, n, concurrency):
            if time.monotonic() > stop_at:
                raise TimeoutError(f"{done} of {n} cycles in {deadline} s")
            comm = await asyncio.wait_for(connect(address, timeout=WAIT, **connect_args), WAIT)
            try:
                await asyncio.wait_for(comm.write({"op": "ping", "i": i}), WAIT)
                got = await asyncio.wait_for(comm.read(), WAIT)
                assert got == {"op": "ping", "i": i}, got
                done += 1
            finally:
                await asyncio.wait_for(comm.close(), WAIT)

    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    return done


@contextlib.contextmanager
def recorded_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Record every ResourceWarning (and others) raised inside, after a gc."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        yield rec
        gc.collect()
        gc.collect()


def resource_warnings(rec: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in rec if issubclass(w.category, ResourceWarning)]


# -- a listener in its own process ----------------------------------------------------


@dataclass(frozen=True)
class TLSSpec:
    ca: str
    cert: str
    key: str | None = None

    def security(self) -> Any:
        from distributed.security import Security

        kw: dict[str, Any] = {}
        for role in ("scheduler", "worker", "client"):
            kw[f"tls_{role}_cert"] = self.cert
            if self.key:
                kw[f"tls_{role}_key"] = self.key
        return Security(tls_ca_file=self.ca, require_encryption=True, **kw)


class ListenerProcess:
    """``python -m bench.relserver``: a listener (echo + soak handler) in its own
    process, so that its memory and descriptors can be read from ``/proc``.
    Stopped by its PID."""

    def __init__(
        self, scheme: str, loop: str, tls: TLSSpec | None = None,
        config: dict[str, Any] | None = None, start_timeout: float = 60.0,
    ) -> None:
        spec = {"scheme": scheme, "loop": loop, "config": config or {},
                "tls": tls.__dict__ if tls else None}
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "DASK_DISTRIBUTED__ADMIN__EVENT_LOOP": loop}
        import tempfile

        # stderr to a file: a pipe nobody drains would block the server's logging
        self._log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.relserver", json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True, env=env,
        )
        self.pid = self.proc.pid
        try:
            line = self._readline(start_timeout)
            info = json.loads(line)
        except BaseException:
            self.stop()
            raise
        self.address: str = info["address"]

    def _readline(self, timeout: float) -> str:
        import selectors

        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise RuntimeError("listener process did not start in time")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"listener process exited: {self.stderr()}")
        return line

    def status(self) -> dict[str, int]:
        return proc_status(self.pid)

    def fds(self) -> int:
        return fd_count(self.pid)

    def reset_peak(self) -> bool:
        return reset_peak_rss(self.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        """What the server logged so far (the last 8000 characters)."""
        if self._log.closed:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read()[-8000:]

    def stop(self) -> str:
        """Stop the process (by PID) and return the tail of its stderr."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(10)
        out = self.stderr()
        for f in (self.proc.stdin, self.proc.stdout, self._log):
            if f is not None and not f.closed:
                f.close()
        return out

    def __enter__(self) -> ListenerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# -- a peer process (SIGKILL faults) --------------------------------------------------


class PeerProcess:
    """``python -m bench.relpeer``: connects to ``address`` and writes large
    messages in a loop (``mode='write'``) or reads slowly (``mode='read'``).
    Prints one line once connected. Killed by its PID."""

    def __init__(self, mode: str, address: str, loop: str, tls: TLSSpec | None = None,
                 size: int = 32 << 20) -> None:
        spec = {"mode": mode, "address": address, "size": size,
                "tls": tls.__dict__ if tls else None}
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "DASK_DISTRIBUTED__ADMIN__EVENT_LOOP": loop}
        import tempfile

        self._log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.relpeer", json.dumps(spec)],
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
        )
        self.pid = self.proc.pid

    async def wait_ready(self, timeout: float = 60.0) -> str:
        loop = asyncio.get_running_loop()
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(loop.run_in_executor(None, self.proc.stdout.readline), timeout)
        if not line:
            self._log.seek(0)
            raise RuntimeError(f"peer process exited: {self._log.read()[-4000:]}")
        return line.strip()

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        for f in (self.proc.stdout, self._log):
            if f is not None and not f.closed:
                f.close()


@contextlib.asynccontextmanager
async def serve(scheme: str, handler: Any, security: Any = None,
                host: str = "127.0.0.1") -> AsyncIterator[Any]:
    """An in-process listener, stopped on exit."""
    from distributed.comm import listen

    kw = security.get_listen_args("scheduler") if security is not None else {}
    listener = listen(f"{scheme}://{host}:0", handler, **kw)
    await listener.start()
    try:
        yield listener
    finally:
        listener.stop()


def connect_args(security: Any) -> dict[str, Any]:
    return security.get_connection_args("client") if security is not None else {}

"""Runs one :class:`ops.Sequence` on a real connected pair and records its trace.

The pair is what distributed's own code gets: ``A`` from
``distributed.comm.connect`` and ``B`` handed to the listener's handler, both after
distributed's handshake, on loopback (plain or TLS). The caller makes the variant
active (e.g. installs the takeover) and passes its scheme and TLS arguments.

The trace records, for each step, the outcome (the value read, normalized: NumPy
arrays and buffers by dtype, shape, length and CRC-32; the exception *class*:
``CommClosedError``, ``FatalCommClosedError``, ``CancelledError`` or ``other``, never
its message) and ``closed()`` of both comms after the step; then what each side
still received when drained (see :func:`_drain`), and how each ``close()`` ended.

Every wait is bounded by ``wait`` seconds: a step that does not finish is
recorded as ``hang``, its task cancelled, and the run goes on.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import struct
import types
import zlib
from dataclasses import dataclass, field
from typing import Any

from distributed.comm import connect, listen
from distributed.comm.core import Comm, CommClosedError, FatalCommClosedError

from tests.differential.ops import (
    SIDES,
    WRITERS_LARGE,
    CancelRead,
    CancelWrite,
    Close,
    DoubleRead,
    Model,
    Op,
    Read,
    Reset,
    Sequence,
    Write,
    Writers,
    WritesThenClose,
    make_message,
    op_text,
    other,
    seq_of,
)

HANG = "hang"
#: Outcomes of a read that end a drain (anything else is a value).
NOT_VALUES = frozenset({HANG, "CommClosedError", "FatalCommClosedError", "CancelledError",
                        "other"})
#: Seconds a cancelled read is left pending before it is cancelled.
CANCEL_AFTER = 0.02
#: Seconds given to the loop after an end (close, abort, reset, cancelled or
#: double read), so that the peer's transport has seen the FIN or RST before
#: ``closed()`` is looked at. Loopback delivers in microseconds; this is slack
#: for a busy CI machine, not a synchronisation the trace relies on (the
#: ``closed()`` entries stock leaves to timing are masked, see Model).
SETTLE_AFTER_END = 0.02
#: Bytes of padding in the client's handshake when the listener is stopped
#: during it: the server then needs several reads to take the handshake, so it
#: is in it when the client's connect is in flight (over TLS on the asyncio loop
#: a small handshake is taken within one callback, before any other task runs).
HANDSHAKE_PAD = 1 << 20


@dataclass
class Trace:
    """What one run of a sequence showed. ``key()`` is what comparisons use;
    ``details`` (exception types and messages, masked values) is only printed."""

    setup: str
    connect: str = "ok"
    handed: bool = True
    steps: list[tuple[str, str, str]] = field(default_factory=list)
    received: dict[str, list[str]] = field(default_factory=lambda: {"A": [], "B": []})
    #: The sequence number of each message in ``received`` (None: not a message).
    received_seqs: dict[str, list[int | None]] = field(
        default_factory=lambda: {"A": [], "B": []})
    ending: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    #: Garbage left in reference cycles through asynciocomm (see cyclic_garbage).
    cycles: list[str] = field(default_factory=list)

    def key(self) -> tuple[Any, ...]:
        return (self.setup, self.connect, self.handed, tuple(self.steps),
                tuple(tuple(self.received[s]) for s in SIDES), tuple(self.ending))

    def lines(self) -> list[str]:
        out = [f"setup {self.setup}: connect {self.connect}, B handed: {self.handed}"]
        out += [f"{op:<28} -> {res:<40} closed {cl}" for op, res, cl in self.steps]
        out += [f"drain {s}: {', '.join(self.received[s]) or '-'}" for s in SIDES]
        out += [f"ending: {', '.join(self.ending) or '-'}"]
        if self.cycles:
            out += [f"left in reference cycles: {', '.join(self.cycles)}"]
        return out


def normalize(value: Any) -> str:
    """A read value as text that two comms must agree on."""
    import numpy as np
    from distributed.protocol import Serialize, Serialized

    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value).tobytes()
        return f"ndarray({value.dtype},{value.shape},{zlib.crc32(data):08x})"
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return f"{type(value).__name__}({len(data)},{zlib.crc32(data):08x})"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return "{" + ", ".join(f"{k!r}: {normalize(v)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(normalize(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, Serialized):
        return f"Serialized({normalize(value.header)}, {normalize(value.frames)})"
    if isinstance(value, Serialize):
        return f"Serialize({normalize(value.data)})"
    return repr(value)


def category(exc: BaseException) -> str:
    if isinstance(exc, FatalCommClosedError):
        return "FatalCommClosedError"
    if isinstance(exc, CommClosedError):
        return "CommClosedError"
    if isinstance(exc, asyncio.CancelledError):
        return "CancelledError"
    return "other"


class _Run:
    def __init__(self, trace: Trace, wait: float) -> None:
        self.trace = trace
        self.wait = wait

    async def bounded(self, aw: Any, what: str) -> tuple[str, Any]:
        """(``"ok"``, result) or (category, None) or (``"hang"``, None).

        ``aw`` runs inline in the calling task (no loop turn before or after it,
        as when distributed's code writes and then aborts), under a timeout.

        A failure is kept as text only (in ``details``), never as the exception:
        its traceback holds this frame, whose ``f_back`` is the caller's frame
        (CPython 3.12+ keeps ``f_back`` of a finished coroutine frame that a
        traceback still references), so a caller holding the exception in a
        local, or a task holding it, would be a reference cycle of the harness's
        own, which the cycle check (cyclic_garbage) would blame on the comm.
        Callers drop the tasks they pass here once this returns, for the same
        reason.
        """
        try:
            if hasattr(asyncio, "timeout"):  # 3.11+
                async with asyncio.timeout(self.wait):
                    return "ok", await aw
            return "ok", await self._within(aw)  # 3.10: one loop turn more
        except (TimeoutError, asyncio.TimeoutError):
            self.trace.details.append(f"{what}: no result within {self.wait} s")
            return HANG, None
        except BaseException as exc:  # noqa: BLE001 (the outcome is recorded)
            self.trace.details.append(f"{what}: {type(exc).__name__}: {exc}")
            return category(exc), None
        finally:
            # A task that failed holds its exception, whose traceback holds this
            # frame: dropping the task here keeps the harness from making a
            # reference cycle of its own through the comm under test.
            aw = None

    async def _within(self, aw: Any) -> Any:
        """``await asyncio.wait_for(aw, self.wait)`` for CPython 3.10, without its
        cycle: 3.10's wait_for raises the task's exception from a frame holding
        the task (task -> exception -> traceback -> wait_for's frame -> task)."""
        task = asyncio.ensure_future(aw)
        aw = None
        try:
            await asyncio.wait((task,), timeout=self.wait)
            if not task.done():
                task.cancel()  # as wait_for: the task is over when this returns
                await asyncio.wait((task,))
                if task.cancelled():
                    raise asyncio.TimeoutError
            return task.result()
        finally:
            task = None

    async def read(self, comm: Comm, what: str) -> str:
        return (await self.read_seq(comm, what))[0]

    async def read_seq(self, comm: Comm, what: str) -> tuple[str, int | None]:
        """A read's outcome and the sequence number of the message read."""
        status, value = await self.bounded(comm.read(), what)
        if status != "ok":
            return status, None
        return normalize(value), seq_of(value)


def raw_socket(comm: Comm) -> Any:
    """The OS socket under a comm (ours or stock), or None once it is gone."""
    protocol = getattr(comm, "_protocol", None)
    if protocol is not None:
        transport = protocol.transport
        return None if transport is None else transport.get_extra_info("socket")
    stream = getattr(comm, "stream", None)
    return None if stream is None else stream.socket


async def _open_pair(seq: Sequence, scheme: str, listen_args: dict[str, Any],
                     connect_args: dict[str, Any], run: _Run) -> dict[str, Comm | None]:
    loop = asyncio.get_running_loop()
    handed: asyncio.Future[Comm] = loop.create_future()

    async def handler(comm: Comm) -> None:
        if not handed.done():
            handed.set_result(comm)

    listener = listen(f"{scheme}://127.0.0.1:0", handler, **listen_args)
    comms: dict[str, Comm | None] = {"A": None, "B": None}
    try:
        if seq.setup == "ctx":
            async with listener:
                dialing = _dial(listener.contact_address, connect_args, run, HANDSHAKE_PAD)
                await _until_handshaking(listener, dialing, run)
        else:
            await listener.start()
            pad = HANDSHAKE_PAD if seq.setup == "stop" else 0
            dialing = _dial(listener.contact_address, connect_args, run, pad)
            if seq.setup == "stop":
                await _until_handshaking(listener, dialing, run)
                listener.stop()
        status, a = await run.bounded(dialing, "connect")
        dialing = None  # a failed task holds its exception (see _Run.bounded)
        run.trace.connect = status
        comms["A"] = a if status == "ok" else None
        status, b = await run.bounded(asyncio.shield(handed), "handler")
        comms["B"] = b if status == "ok" else None
        run.trace.handed = status == "ok"
    finally:
        listener.stop()
    return comms


def _dial(address: str, connect_args: dict[str, Any], run: _Run,
          pad: int = 0) -> asyncio.Task[Comm]:
    overrides = {"pad": bytes(pad)} if pad else None
    return asyncio.ensure_future(connect(address, timeout=run.wait,
                                         handshake_overrides=overrides, **connect_args))


async def _until_handshaking(listener: Any, dialing: asyncio.Future[Any], run: _Run) -> None:
    """Wait (bounded) until the server side is in distributed's handshake: it is
    among the listener's handshaking comms (``BaseListener``'s private set, the one
    ``abort_handshaking_comms()`` aborts), or the connect has finished first. Which
    of the two it was depends on timing; stock's trace does not (its ``stop()``
    leaves established comms alone, handshaking or not), so it is only noted."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + run.wait
    while not dialing.done() and loop.time() < deadline:
        if getattr(listener, "_BaseListener__comms", None):  # re-read: it is swapped
            run.trace.details.append("stopped with the server side in its handshake")
            return
        await asyncio.sleep(0)
    run.trace.details.append("stopped after connect() returned")


async def _step(op: Op, comm: Comm, seqno: int, run: _Run,
                closes: list[tuple[str, asyncio.Future[Any]]]) -> str:
    what = op_text(op)
    if isinstance(op, Write):
        status, _ = await run.bounded(comm.write(make_message(op.kind, op.size, seqno)), what)
        return status
    if isinstance(op, Read):
        return await run.read(comm, what)
    if isinstance(op, CancelRead):
        task = asyncio.ensure_future(comm.read())
        await asyncio.sleep(CANCEL_AFTER)
        task.cancel()
        status, value = await run.bounded(task, what)
        task = None  # it holds its exception (see _Run.bounded)
        return normalize(value) if status == "ok" else status
    if isinstance(op, DoubleRead):
        first = asyncio.ensure_future(comm.read())
        await asyncio.sleep(CANCEL_AFTER)
        second = await run.read(comm, what + " second")
        status, value = await run.bounded(first, what + " first")
        first = None  # it holds its exception (see _Run.bounded)
        return f"{normalize(value) if status == 'ok' else status} | {second}"
    if isinstance(op, CancelWrite):
        task = asyncio.ensure_future(comm.write(make_message(op.kind, op.size, seqno)))
        await asyncio.sleep(0)  # the write has begun
        task.cancel()
        status, _ = await run.bounded(task, what)
        task = None  # it holds its exception (see _Run.bounded)
        return status
    if isinstance(op, (Writers, WritesThenClose)):
        return await _writers(op, comm, seqno, run, closes)
    if isinstance(op, Close):
        closes.append((what, asyncio.ensure_future(comm.close())))
        await asyncio.sleep(0)
        return "started"
    if isinstance(op, Reset):
        sock = raw_socket(comm)
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    comm.abort()  # Abort or Reset
    return "ok"


async def _writers(op: Writers | WritesThenClose, comm: Comm, seqno: int, run: _Run,
                   closes: list[tuple[str, asyncio.Future[Any]]]) -> str:
    """Concurrent writers (see ops.Writers, ops.WritesThenClose). Their messages
    carry ``seqno``, in the order they are written. The outcome lists each
    write's status; any order other than the call order is reported."""
    called: list[int] = []

    async def write(tag: int) -> None:
        msg = make_message("array" if tag == 1 else "dict", WRITERS_LARGE, seqno)
        msg["w"] = tag
        called.append(tag)
        await comm.write(msg)

    async def first() -> None:
        await write(1)
        if isinstance(op, Writers):
            await write(3)

    tasks = [asyncio.ensure_future(first())]
    await asyncio.sleep(0)  # the first writer has begun
    tasks.append(asyncio.ensure_future(write(2)))
    if isinstance(op, WritesThenClose):
        await asyncio.sleep(0)
        closes.append((op_text(op) + " close", asyncio.ensure_future(comm.close())))
    results = [(await run.bounded(t, f"{op_text(op)} writer {i}"))[0]
               for i, t in enumerate(tasks)]
    tasks.clear()  # they hold their exceptions (see _Run.bounded)
    return f"{' '.join(results)} order {called}"


def _closed(comms: dict[str, Comm | None], model: Model, open_bugs: frozenset[str],
            run: _Run, what: str) -> str:
    marks = []
    for s in SIDES:
        comm = comms[s]
        if comm is None:
            marks.append(f"{s}-")
            continue
        value = "T" if comm.closed() else "F"
        free = model.closed_is_free(s) or (
            "closed-on-fin-while-unread" in open_bugs and model.peer_ended(s)
            and not model.sides[s].ended)
        if free:
            run.trace.details.append(f"{what}: closed() of {s} masked, was {value}")
        # '*': messages are unread after the peer's end (compare.SAFER).
        marks.append(f"{s}?" if free else f"{s}{value}{'*' * model.unread_after_end(s)}")
    return " ".join(marks)


async def _drain(comms: dict[str, Comm | None], model: Model, run: _Run,
                 closes: list[tuple[str, asyncio.Future[Any]]]) -> None:
    """What each side still receives: A reads what the model says is unread (and
    the end, if B has ended); B likewise; then A is closed and B reads once more
    (the end of stream that A's close must give); then B is closed. Last, every
    ``close()`` started by a step is awaited (bounded)."""
    for s in SIDES:
        comm, st = comms[s], model.sides[s]
        if comm is None or st.ended:
            continue
        for _ in range(len(st.unread) + model.peer_ended(s)):
            got, seq = await run.read_seq(comm, f"drain {s}")
            run.trace.received[s].append(got)
            run.trace.received_seqs[s].append(seq)
            if got in NOT_VALUES:
                break
        st.ended = st.ended or model.peer_ended(s)
        st.unread.clear()
    a, b = comms["A"], comms["B"]
    if a is not None and not model.sides["A"].ended:
        closes.append(("final A.close()", asyncio.ensure_future(a.close())))
    if b is not None and not model.sides["B"].ended:
        if a is not None:
            got, seq = await run.read_seq(b, "drain B after A closed")
            run.trace.received["B"].append(got)
            run.trace.received_seqs["B"].append(seq)
        closes.append(("final B.close()", asyncio.ensure_future(b.close())))
    for what, task in closes:
        status, _ = await run.bounded(task, what)
        run.trace.ending.append(f"{what} {status}")
    task = None  # it holds its exception (see _Run.bounded)


def cyclic_garbage() -> list[str]:
    """What ``gc.collect()`` finds now that belongs to asynciocomm: its objects,
    frames of its code, and memoryviews (with their exporter in one cycle,
    CPython's collector cannot clear them). Other libraries' cycles (the loop's
    transports, tornado's) are not this check's concern."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = set()
        for obj in gc.garbage:
            if isinstance(obj, types.FrameType):
                if f"{os.sep}asynciocomm{os.sep}" in obj.f_code.co_filename:
                    found.add(f"frame of {obj.f_code.co_name}")
            elif isinstance(obj, memoryview):
                found.add("memoryview")
            elif type(obj).__module__.startswith("asynciocomm"):
                found.add(type(obj).__name__)
        return sorted(found)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def run_sequence(seq: Sequence, scheme: str, listen_args: dict[str, Any] | None = None,
                       connect_args: dict[str, Any] | None = None, *, wait: float = 10.0,
                       open_bugs: frozenset[str] = frozenset(),
                       gc_check: bool = False) -> Trace:
    """Run ``seq`` on a fresh pair of ``scheme`` and return its trace. With
    ``gc_check``, the collector is off meanwhile and ``Trace.cycles`` says
    what it would have had to collect of asynciocomm's afterwards."""
    if not gc_check:
        return await _run_sequence(seq, scheme, listen_args, connect_args, wait, open_bugs)
    gc.collect()
    gc.disable()
    try:
        trace = await _run_sequence(seq, scheme, listen_args, connect_args, wait, open_bugs)
        await asyncio.sleep(SETTLE_AFTER_END)  # the aborted transports report their end
        trace.cycles = cyclic_garbage()
    finally:
        gc.enable()
    return trace


async def _run_sequence(seq: Sequence, scheme: str, listen_args: dict[str, Any] | None,
                        connect_args: dict[str, Any] | None, wait: float,
                        open_bugs: frozenset[str]) -> Trace:
    run = _Run(Trace(seq.setup), wait)
    comms = await _open_pair(seq, scheme, listen_args or {}, connect_args or {}, run)
    closes: list[tuple[str, asyncio.Future[Any]]] = []
    model = Model()
    try:
        for seqno, op in enumerate(seq.steps):
            comm = comms[op.side]
            what = op_text(op)
            result = "no comm" if comm is None else await _step(op, comm, seqno, run, closes)
            model.apply(op)
            written = len(Model.written(op))
            if isinstance(op, CancelWrite) and result == "CancelledError" and written:
                # Cancelled before it was accepted: nothing of it was sent.
                del model.sides[other(op.side)].unread[-written:]
            if not isinstance(op, (Write, Read, CancelWrite, Writers)):
                await asyncio.sleep(SETTLE_AFTER_END)
            run.trace.steps.append((what, result, _closed(comms, model, open_bugs, run, what)))
        await _drain(comms, model, run, closes)
    finally:
        for comm in comms.values():
            if comm is not None:
                comm.abort()
        for _, task in closes:
            if not task.done():
                task.cancel()
        closes.clear()  # the close tasks hold their exceptions (see _Run.bounded)
    return run.trace

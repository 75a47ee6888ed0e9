"""The off-loop TLS layer's I/O thread (``tls-thread``, off by default).

One daemon thread per process, shared by every connection of the process that
uses the off-loop TLS layer (:mod:`asynciocomm.offloop`). It owns the raw,
non-blocking sockets and, for each, an ``ssl.SSLObject`` over two
``MemoryBIO``s: the handshake, recv -> decrypt, encrypt -> send, and the
close_notify exchange all run here, where CPython releases the GIL around
OpenSSL's record work and around the socket syscalls. The event loop only
ever sees plaintext.

Both directions are batched:

* **loop -> thread**: commands (writes, close, abort) are queued and the thread
  is woken through a socketpair, once per batch (:meth:`IOThread.submit`);
* **thread -> loop**: everything one selector pass produced for one event loop
  (plaintext, EOF, errors, write acknowledgements) is handed over by one
  ``call_soon_threadsafe`` (a :class:`Sink`).

Flow control: the thread stops reading a connection while more than
``INFLIGHT_MAX`` bytes of its plaintext wait on the loop side, and reports
the plaintext it has sent (``"sent"``) when its queue empties or falls below the
connection's low-water mark, which drives the loop side's ``pause_writing``.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import selectors
import socket
import ssl
import threading
import time
from typing import Any, Protocol

#: Ciphertext bytes asked of one recv(): as the plain protocol's read buffer.
RECV_SIZE = 256 * 1024
#: Ciphertext received from one connection per selector pass before its
#: plaintext is posted, so one wake-up of the loop carries a large batch
#: without starving the other connections.
READ_BUDGET = 1024 * 1024
#: Plaintext encrypted into one ciphertext buffer, sent with one send().
WRITE_CHUNK = 256 * 1024
#: Plaintext encrypted per connection per selector pass (fairness bound).
WRITE_BUDGET = 4 * 1024 * 1024
#: The thread stops reading a connection while this much of its plaintext is
#: posted but not yet taken by its protocol (read flow control across the
#: threads), and resumes at ``INFLIGHT_LOW``.
INFLIGHT_MAX = 4 * 1024 * 1024
INFLIGHT_LOW = 1024 * 1024

HANDSHAKE, OPEN, SHUTDOWN, CLOSED = range(4)


class Sink(Protocol):
    """Where a connection's events go: one event loop's inbox."""

    lock: threading.Lock

    def post(self, items: list[tuple[Any, str, Any]]) -> bool:
        """Hand events to the loop; False when its loop is closed."""
        ...


class TLSConnection:
    """Thread-side state of one connection. Every method but :meth:`credit`
    runs on the I/O thread; ``handler`` is the loop-side object events are
    posted for."""

    def __init__(self, io: IOThread, sock: socket.socket, sslobj: ssl.SSLObject,
                 incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, sink: Sink,
                 handler: Any, low_water: int, shutdown_timeout: float) -> None:
        self.io, self.sock, self.sslobj = io, sock, sslobj
        self.incoming, self.outgoing = incoming, outgoing
        self.sink, self.handler = sink, handler
        self.low_water = low_water
        self.shutdown_timeout = shutdown_timeout
        self.state = HANDSHAKE
        self.mask = 0
        self.accepting = True  # takes writes (not after close() or the peer's EOF)
        self.peer_eof = False
        self.out_queue: collections.deque[memoryview] = collections.deque()
        self.out_cipher: memoryview | None = None
        self.encrypted_pending = 0
        self.received = 0  # plaintext bytes fed by the loop
        self.sent = 0  # of which the ciphertext has gone to the kernel
        self.above_low = False
        self.undelivered = 0  # under sink.lock: posted plaintext not yet taken
        self.stalled = False  # under sink.lock: reading stopped on undelivered
        self.rbuf = bytearray(RECV_SIZE)
        self.pbuf = bytearray(RECV_SIZE)

    # -- helpers -------------------------------------------------------------------

    def post(self, kind: str, payload: Any = None) -> None:
        self.io.post(self, kind, payload)

    def update_interest(self) -> None:
        if self.state == CLOSED:
            return
        want = 0
        if not self.stalled:
            want |= selectors.EVENT_READ
        if self.out_cipher is not None or (self.state == OPEN and self.out_queue):
            want |= selectors.EVENT_WRITE
        if want == self.mask:
            return
        sel = self.io.selector
        if self.mask == 0:
            sel.register(self.sock, want, self)
        elif want == 0:
            sel.unregister(self.sock)
        else:
            sel.modify(self.sock, want, self)
        self.mask = want

    def finish(self, exc: BaseException | None, report: bool = True) -> None:
        """Close the socket now; report the end to the loop unless it asked."""
        if self.state == CLOSED:
            return
        self.state = CLOSED
        if self.mask:
            self.io.selector.unregister(self.sock)
            self.mask = 0
        self.sock.close()
        self.out_queue.clear()
        self.out_cipher = None
        if report:
            self.post("lost", exc)

    def guarded(self, fn: Any, *args: Any) -> None:
        """Run one step; an OS or TLS error ends the connection with it."""
        if self.state == CLOSED:
            return
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001  (OS and TLS errors; a bug must
            # end this connection, never the thread that serves every other one)
            failed = "failed" if self.state == HANDSHAKE else "lost"
            self.finish(None, report=False)
            self.post(failed, exc)
            return
        self.update_interest()

    # -- the handshake -------------------------------------------------------------

    def start(self) -> None:
        self.handshake_step()

    def handshake_step(self) -> None:
        try:
            self.sslobj.do_handshake()
        except ssl.SSLWantReadError:
            self.queue_cipher()
            self.pump_write()
            return
        self.queue_cipher()
        self.state = OPEN
        sslobj = self.sslobj
        self.post("connected", {"peercert": sslobj.getpeercert(), "cipher": sslobj.cipher(),
                                "compression": sslobj.compression()})
        self.pump_write()
        self.decrypt()

    # -- reading -------------------------------------------------------------------

    def on_readable(self) -> None:
        received = 0
        view = memoryview(self.rbuf)
        while received < READ_BUDGET:
            try:
                n = self.sock.recv_into(view)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:
                self.peer_eof = True
                break
            self.incoming.write(view[:n])
            received += n
            if n < RECV_SIZE:
                break
        if self.state == HANDSHAKE:
            if self.peer_eof:
                raise ConnectionResetError("the peer closed during the TLS handshake")
            self.handshake_step()
        elif self.state == OPEN:
            self.decrypt()
            if self.peer_eof and self.accepting:
                self.accepting = False
                self.post("eof")
                self.pump_write()
        elif self.state == SHUTDOWN:
            self.shutdown_step()

    def decrypt(self) -> None:
        view = memoryview(self.pbuf)
        size = len(self.pbuf)
        off = 0
        closed = False
        chunks: list[bytes] = []
        while True:
            try:
                k = self.sslobj.read(size - off, view[off:])
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                closed = True
                break
            if k == 0:
                closed = True
                break
            off += k
            if off == size:
                chunks.append(bytes(view))
                off = 0
        if off:
            chunks.append(bytes(view[:off]))
        if chunks:
            total = sum(map(len, chunks))
            with self.sink.lock:
                self.undelivered += total
                if self.undelivered > INFLIGHT_MAX:
                    self.stalled = True
            for chunk in chunks:
                self.post("data", chunk)
        if closed and self.accepting:  # the peer's close_notify
            self.accepting = False
            self.post("eof")
            self.pump_write()

    def credit(self, n: int) -> None:
        """Loop thread: ``n`` posted bytes were taken by the protocol."""
        with self.sink.lock:
            self.undelivered -= n
            wake = self.stalled and self.undelivered <= INFLIGHT_LOW
            if wake:
                self.stalled = False
        if wake:
            self.io.submit(self.guarded, lambda: None)

    # -- writing -------------------------------------------------------------------

    def feed(self, buffers: list[memoryview], close: bool) -> None:
        n = sum(b.nbytes for b in buffers)
        if self.accepting and self.state == OPEN:
            self.out_queue.extend(buffers)
            self.received += n
            self.above_low = self.received - self.sent > self.low_water
        else:  # after the end: dropped, as a closing TLS transport drops them
            self.received += n
            self.sent += n
            self.post("sent", self.sent)
        if close:
            self.accepting = False
        self.pump_write()

    def queue_cipher(self) -> None:
        if self.out_cipher is None and self.outgoing.pending:
            self.out_cipher = memoryview(self.outgoing.read())

    def take(self) -> memoryview | bytes:
        """Up to WRITE_CHUNK bytes of queued plaintext, small buffers joined."""
        q = self.out_queue
        first = q[0]
        if first.nbytes >= WRITE_CHUNK:
            if first.nbytes == WRITE_CHUNK:
                return q.popleft()
            q[0] = first[WRITE_CHUNK:]
            return first[:WRITE_CHUNK]
        parts = [q.popleft()]
        total = first.nbytes
        while q and total + q[0].nbytes <= WRITE_CHUNK:
            total += q[0].nbytes
            parts.append(q.popleft())
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def pump_write(self) -> None:
        budget = WRITE_BUDGET
        while self.state != CLOSED:
            cipher = self.out_cipher
            if cipher is not None:
                try:
                    n = self.sock.send(cipher)
                except (BlockingIOError, InterruptedError):
                    return
                if n < cipher.nbytes:
                    self.out_cipher = cipher[n:]
                    return
                self.out_cipher = None
                self.queue_cipher()
                if self.out_cipher is None and self.encrypted_pending:
                    self.sent += self.encrypted_pending
                    self.encrypted_pending = 0
                    self.acknowledge()
                continue
            if self.state != OPEN or not self.out_queue or budget <= 0:
                break
            plain = self.take()
            n = self.sslobj.write(plain)
            self.encrypted_pending += n
            budget -= n
            self.queue_cipher()
        if (self.state == OPEN and not self.accepting and not self.out_queue
                and self.out_cipher is None):
            self.start_shutdown()

    def acknowledge(self) -> None:
        unsent = self.received - self.sent
        if unsent == 0 or (self.above_low and unsent <= self.low_water):
            self.post("sent", self.sent)
        self.above_low = unsent > self.low_water

    # -- ending --------------------------------------------------------------------

    def start_shutdown(self) -> None:
        self.state = SHUTDOWN
        self.io.add_timer(self.shutdown_timeout, self)
        self.shutdown_step()

    def shutdown_step(self) -> None:
        try:
            self.sslobj.unwrap()
        except ssl.SSLWantReadError:
            self.queue_cipher()
            self.pump_write()
            if self.peer_eof and self.out_cipher is None:
                self.finish(None)  # the peer is gone: no close_notify will come
            return
        except (ssl.SSLError, OSError):
            self.finish(None)
            return
        self.queue_cipher()
        self.pump_write()
        if self.out_cipher is None:
            self.finish(None)

    def on_timer(self) -> None:
        if self.state == SHUTDOWN:
            self.finish(None)  # the peer never answered: give up, as asyncio does


class IOThread:
    """The process's I/O thread: a selector over the connections' sockets."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self._rwake, self._wwake = socket.socketpair()
        self._rwake.setblocking(False)
        self._wwake.setblocking(False)
        self.selector.register(self._rwake, selectors.EVENT_READ, None)
        self._commands: collections.deque[tuple[Any, tuple[Any, ...]]] = collections.deque()
        self._poked = False
        self._timers: list[tuple[float, int, TLSConnection]] = []
        self._seq = itertools.count()
        self._posts: dict[Any, list[tuple[Any, str, Any]]] = {}
        self.thread = threading.Thread(target=self._run, name="asynciocomm-tls-io",
                                       daemon=True)
        self.thread.start()

    def submit(self, fn: Any, *args: Any) -> None:
        """Any thread: run ``fn(*args)`` on the I/O thread, waking it once."""
        self._commands.append((fn, args))
        if not self._poked:
            self._poked = True
            try:
                self._wwake.send(b"\0")
            except (BlockingIOError, InterruptedError):
                pass  # already full of wake-ups

    def post(self, conn: TLSConnection, kind: str, payload: Any) -> None:
        self._posts.setdefault(conn.sink, []).append((conn.handler, kind, payload))

    def add_timer(self, delay: float, conn: TLSConnection) -> None:
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._seq), conn))

    def _run(self) -> None:
        while True:
            timeout = None
            if self._timers:
                timeout = max(0.0, self._timers[0][0] - time.monotonic())
            for key, mask in self.selector.select(timeout):
                conn = key.data
                if conn is None:
                    self._drain_wake()
                    continue
                if mask & selectors.EVENT_READ:
                    conn.guarded(conn.on_readable)
                if mask & selectors.EVENT_WRITE:
                    conn.guarded(conn.pump_write)
            self._run_commands()
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now:
                conn = heapq.heappop(self._timers)[2]
                conn.guarded(conn.on_timer)
            self._flush_posts()

    def _drain_wake(self) -> None:
        try:
            while self._rwake.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _run_commands(self) -> None:
        self._poked = False
        commands = self._commands
        while commands:
            fn, args = commands.popleft()
            fn(*args)

    def _flush_posts(self) -> None:
        posts, self._posts = self._posts, {}
        for sink, items in posts.items():
            if not sink.post(items):  # its loop is closed: nothing will read them
                for handler, _, _ in items:
                    conn = getattr(handler, "conn", None)
                    if conn is not None:
                        conn.finish(None, report=False)


_lock = threading.Lock()
_io: IOThread | None = None


def io_thread() -> IOThread:
    """The process's I/O thread, started on first use."""
    global _io
    with _lock:
        if _io is None:
            _io = IOThread()
        return _io


def io_thread_ident() -> int | None:
    """The I/O thread's ident, if it runs (for per-thread CPU in the bench)."""
    return None if _io is None else _io.thread.ident

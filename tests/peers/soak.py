"""The integrity soak of the reliability scenarios: checksummed messages of
random shape and size (:func:`make_message`, :func:`check_message`), the server
side that verifies and echoes them or writes a burst right before ``close()``
(:func:`soak_handler`), and the client side that drives many comms and tallies
what was lost, reordered or corrupted (:func:`soak`, :class:`SoakResult`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from tests.peers.conn import WAIT


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
        top = max(1, max_size).bit_length() - 1
        nbytes = 0 if rng.random() < 0.05 else int(2 ** rng.uniform(0, top))
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

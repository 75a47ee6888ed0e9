"""Idle comms are cheap: the receive buffer costs memory only where data lands.

A scheduler holds a few comms per worker; with a committed 256 KiB buffer each,
3000 comms would pin ~750 MiB before a single message.
"""

from __future__ import annotations

from distributed.comm import connect, listen

N = 200


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0])


async def test_idle_comms_do_not_commit_their_receive_buffers() -> None:
    accepted = []

    async def handler(comm) -> None:
        accepted.append(comm)

    async with listen("asyncio://127.0.0.1:0", handler) as listener:
        comms = [await connect(listener.contact_address)]  # warm up allocators
        before = _rss_kib()
        comms += [await connect(listener.contact_address) for _ in range(N)]
        grown = _rss_kib() - before
        try:
            # 2 * N comms exist now (both ends). A committed 256 KiB buffer each
            # would be 100 MiB; allow a quarter of one buffer per comm.
            assert grown < 2 * N * 64, f"{grown} KiB for {2 * N} comms"
        finally:
            for comm in comms + accepted:
                comm.abort()

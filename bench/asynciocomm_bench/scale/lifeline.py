"""Child processes of the scale bench die with the bench process."""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send ``sig`` when the parent exits (Linux only).

    The bench starts its children through ``ip netns exec``, which execs, so the
    parent is the bench itself. If it is already gone, exit now.
    """
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the bench stops us by PID
        return
    if os.getppid() != parent or parent == 1:
        os._exit(1)

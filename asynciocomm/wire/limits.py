"""Sizes the wire format and the operating system impose."""

from __future__ import annotations

import ctypes

#: Largest size handed to one send()/recv() call: C int max (bpo-42853; OpenSSL and
#: some platforms take an int length). Larger buffers are split into views.
C_INT_MAX: int = 256 ** ctypes.sizeof(ctypes.c_int) // 2 - 1

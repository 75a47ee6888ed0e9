"""Selects the codec implementation: compiled twin or pure Python.

``asynciocomm._ccodec`` is ``codec.py`` compiled by Cython at install time (see
setup.py). It is used when present, unless ``ASYNCIOCOMM_PURE_PYTHON=1`` is set;
both expose the same names and pass the same tests.
"""

from __future__ import annotations

import os
from types import ModuleType

from asynciocomm import codec as pure

FORCE_PURE = os.environ.get("ASYNCIOCOMM_PURE_PYTHON", "") not in ("", "0")


def _load() -> ModuleType:
    if FORCE_PURE:
        return pure
    try:
        from asynciocomm import _ccodec  # type: ignore[attr-defined]
    except ImportError:
        return pure
    return _ccodec


impl: ModuleType = _load()
#: True when the compiled codec is in use.
COMPILED: bool = impl is not pure

FrameDecoder = impl.FrameDecoder
encode_frames = impl.encode_frames
encode_single = impl.encode_single

"""Selects the decoder and encoder implementations: compiled twins or pure Python.

``asynciocomm.wire._cdecoder`` and ``asynciocomm.wire._cencoder`` are ``decoder.py`` and
``encoder.py`` compiled by Cython at install time (see setup.py). They are used
when both are present, unless ``ASYNCIOCOMM_PURE_PYTHON=1`` is set; each twin
exposes the same names as its source and passes the same tests.
"""

from __future__ import annotations

import os
from types import ModuleType

from asynciocomm.wire import decoder as pure_decoder
from asynciocomm.wire import encoder as pure_encoder

FORCE_PURE = os.environ.get("ASYNCIOCOMM_PURE_PYTHON", "") not in ("", "0")


def _load() -> tuple[ModuleType, ModuleType]:
    if FORCE_PURE:
        return pure_decoder, pure_encoder
    try:
        from asynciocomm.wire import (
            _cdecoder,
            _cencoder,  # type: ignore[attr-defined]
        )
    except ImportError:
        return pure_decoder, pure_encoder
    return _cdecoder, _cencoder


decoder_impl: ModuleType
encoder_impl: ModuleType
decoder_impl, encoder_impl = _load()
#: True when the compiled decoder and encoder are in use.
COMPILED: bool = decoder_impl is not pure_decoder and encoder_impl is not pure_encoder

FrameDecoder = decoder_impl.FrameDecoder
encode_frames = encoder_impl.encode_frames
encode_single = encoder_impl.encode_single

"""The codec is sans-I/O: asynciocomm.wire imports nothing of dask, distributed,
yaml or asyncio. Checked by loading it in a fresh interpreter where those
cannot be imported, under a bare ``asynciocomm`` package (the package's own
``__init__``, which registers the settings with dask, is not the codec's)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import importlib.abc, importlib.util, sys, types

FORBIDDEN = ("dask", "distributed", "yaml", "asyncio", "tornado")

class Forbid(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            raise ImportError(f"the codec imported {name}")
        return None

sys.meta_path.insert(0, Forbid())
spec = importlib.util.find_spec("asynciocomm")
package = types.ModuleType("asynciocomm")
package.__path__ = list(spec.submodule_search_locations)
sys.modules["asynciocomm"] = package

import struct
from asynciocomm.wire import buffers, decoder, encoder, errors, limits, speedups
for impl in (speedups, decoder):
    frames, total = (speedups.encode_frames if impl is speedups else encoder.encode_frames)(
        [b"header", memoryview(bytearray(b"x" * 100_000))], 16 * 1024)
    dec = impl.FrameDecoder()
    for buf in frames:
        dec.feed(buf)
    got, nbytes = dec.pop()
    assert [bytes(f) for f in got] == [b"header", b"x" * 100_000], got
try:
    decoder.FrameDecoder().feed(struct.pack("<QQ", 8, 0))
except errors.ProtocolError:
    pass
else:
    raise AssertionError("zero frames accepted")
print("compiled" if speedups.COMPILED else "pure", sorted(
    m for m in sys.modules if m.split(".")[0] in FORBIDDEN))
"""


def test_the_codec_imports_nothing_of_dask_distributed_yaml_or_asyncio() -> None:
    for pure in ("0", "1"):
        env = {**os.environ, "ASYNCIOCOMM_PURE_PYTHON": pure}
        run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.split() == ["pure" if pure == "1" else "compiled", "[]"], run.stdout

"""Build of the optional compiled codec.

``asynciocomm/codec.py`` is compiled by Cython (pure-Python mode) into the
extension ``asynciocomm._ccodec`` from a build-time copy of the same source, so
there is one implementation and a compiled twin of it. If Cython or a C compiler is
missing, or ``ASYNCIOCOMM_PURE_PYTHON=1`` is set, the package installs pure Python
and :mod:`asynciocomm.speedups` uses ``codec.py`` itself.
"""

from __future__ import annotations

import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
PURE = os.environ.get("ASYNCIOCOMM_PURE_PYTHON", "") not in ("", "0")


class OptionalBuildExt(build_ext):
    """Compile the extension when possible; fall back to pure Python otherwise."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any build failure means "pure"
            print(f"asynciocomm: compiled codec not built ({e}); using pure Python", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            print(f"asynciocomm: {ext.name} not built ({e}); using pure Python", file=sys.stderr)


def extensions() -> list[Extension]:
    if PURE:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("asynciocomm: Cython not available; using pure Python", file=sys.stderr)
        return []
    src = os.path.join(HERE, "asynciocomm", "codec.py")
    copy = os.path.join(HERE, "asynciocomm", "_ccodec.py")
    shutil.copyfile(src, copy)
    try:
        return cythonize(
            [Extension("asynciocomm._ccodec", [os.path.relpath(copy, HERE)])],
            compiler_directives={"language_level": 3, "boundscheck": False, "wraparound": False},
            quiet=True,
        )
    finally:
        os.remove(copy)  # the .c file now carries it; never import the copy


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})

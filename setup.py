"""Build of the optional compiled decoder and encoder.

``asynciocomm/wire/decoder.py`` and ``asynciocomm/wire/encoder.py`` are compiled by Cython
(pure-Python mode) into the extensions ``asynciocomm.wire._cdecoder`` and
``asynciocomm.wire._cencoder``, each from a build-time copy of its source, so there is
one implementation of each and a compiled twin of it. If Cython or a C compiler is
missing, or ``ASYNCIOCOMM_PURE_PYTHON=1`` is set, the package installs pure Python
and :mod:`asynciocomm.wire.speedups` uses ``decoder.py`` and ``encoder.py`` themselves.
"""

from __future__ import annotations

import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
PURE = os.environ.get("ASYNCIOCOMM_PURE_PYTHON", "") not in ("", "0")
#: asynciocomm/wire/<name>.py is compiled into asynciocomm.wire._c<name>.
TWINS = ("decoder", "encoder")
WIRE = os.path.join(HERE, "asynciocomm", "wire")


class OptionalBuildExt(build_ext):
    """Compile the extensions when possible; fall back to pure Python otherwise,
    and say so once, whichever step failed (no compiler, no headers, a Cython
    error), so that a user sees one line rather than one traceback per twin."""

    def run(self) -> None:
        self._failures: list[str] = []
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any build failure means "pure"
            self._failures.append(str(e))
        if self._failures:
            print(
                "asynciocomm: compiled decoder/encoder not built "
                f"({self._failures[0]}); using pure Python",
                file=sys.stderr,
            )

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            self._failures.append(f"{ext.name}: {e}")


def extensions() -> list[Extension]:
    if PURE:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("asynciocomm: Cython not available; using pure Python", file=sys.stderr)
        return []
    copies: list[str] = []
    try:
        modules: list[Extension] = []
        for name in TWINS:
            copy = os.path.join(WIRE, f"_c{name}.py")
            shutil.copyfile(os.path.join(WIRE, f"{name}.py"), copy)
            copies.append(copy)
            modules.append(Extension(f"asynciocomm.wire._c{name}", [os.path.relpath(copy, HERE)]))
        return cythonize(
            modules,
            compiler_directives={"language_level": 3, "boundscheck": False, "wraparound": False},
            quiet=True,
        )
    finally:
        for copy in copies:
            os.remove(copy)  # the .c files now carry them; never import a copy


setup(
    ext_modules=extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
)

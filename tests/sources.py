"""A copy of the parts of the checkout a build needs, so that building a wheel or an
sdist in a test leaves nothing in the checkout. Standard library only: the release
tests import it where asynciocomm and distributed are not installed."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def copy_sources(dest: Path, names: Iterable[str],
                 ignore: Callable[[str, list[str]], Iterable[str]]) -> Path:
    """Copy each of ``names`` (files or folders under the checkout) into ``dest``."""
    for name in names:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, dest / name, ignore=ignore)
        else:
            shutil.copy2(path, dest / name)
    return dest

"""Progress of a long run: a rich bar on a terminal, plain lines anywhere else
(a pipe, a file, a CI log), nothing when ``quiet``."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class Bar:
    """One progress task; ``advance`` and ``describe`` update it, ``log`` prints a
    line above it. Off a terminal every ``describe`` is a line of its own."""

    def __init__(self, total: int, description: str, quiet: bool = False,
                 stream: TextIO | None = None) -> None:
        self.total = max(1, total)
        self.description = description
        self.quiet = quiet
        self.stream = stream or sys.stdout
        self.done = 0
        self._started = time.monotonic()
        self._progress: Any = None
        self._task: Any = None

    @property
    def plain(self) -> bool:
        """True when the output is not a terminal: lines instead of a bar."""
        return not self.quiet and not self.stream.isatty()

    def __enter__(self) -> "Bar":
        self._started = time.monotonic()
        if not self.quiet and not self.plain:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(),
                MofNCompleteColumn(), TimeElapsedColumn(),
                console=Console(file=self.stream), refresh_per_second=2, transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total)
        return self

    def _line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def advance(self, n: int = 1) -> None:
        """Move the bar by ``n`` steps."""
        self.done += n
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def describe(self, text: str) -> None:
        """Change the bar's label (e.g. the configuration being measured)."""
        if self._progress is not None:
            self._progress.update(self._task, description=f"{self.description}: {text}")
        elif self.plain:
            self._line(f"{self.description}: {text} ({min(self.done, self.total)}/"
                       f"{self.total} steps, {time.monotonic() - self._started:.0f} s)")

    def log(self, text: str, error: bool = False) -> None:
        """Print a line above the bar (in red on a terminal when ``error``)."""
        if self._progress is not None:
            self._progress.console.print(text, style="red" if error else None,
                                         markup=False, highlight=False)
        elif not self.quiet:
            self._line(text)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=self.total)
            self._progress.stop()
        elif self.plain:
            self._line(f"{self.description}: done in {time.monotonic() - self._started:.0f} s")

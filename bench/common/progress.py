"""A rich progress bar for long runs (silent when ``quiet``)."""

from __future__ import annotations

from typing import Any


class Bar:
    """A single rich progress task; ``advance`` and ``describe`` update it."""

    def __init__(self, total: int, description: str, quiet: bool = False) -> None:
        self.total = max(1, total)
        self.description = description
        self.quiet = quiet
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> "Bar":
        if not self.quiet:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress,
                                       TextColumn, TimeElapsedColumn)

            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(),
                MofNCompleteColumn(), TimeElapsedColumn(),
                refresh_per_second=2, transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total)
        return self

    def advance(self, n: int = 1) -> None:
        """Move the bar by ``n`` steps."""
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def describe(self, text: str) -> None:
        """Change the bar's label (e.g. the configuration being measured)."""
        if self._progress is not None:
            self._progress.update(self._task, description=f"{self.description}: {text}")

    def log(self, text: str) -> None:
        """Print a line above the bar."""
        if self._progress is not None:
            self._progress.console.print(text)
        elif not self.quiet:
            print(text)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=self.total)
            self._progress.stop()

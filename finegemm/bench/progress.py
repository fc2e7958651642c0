"""A progress bar over (case, peer) steps on stderr: rich's when installed and stderr is a terminal,
otherwise one plain line per step (so logs of a remote run still show where it got to)."""

from __future__ import annotations

import sys
from typing import Any


class Progress:
    def __init__(self, total: int, enabled: bool = True, plain: bool = False) -> None:
        self.total, self.done, self.enabled = total, 0, enabled
        self._rich: Any = None
        self._task: Any = None
        if enabled and not plain and sys.stderr.isatty():
            try:
                from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
                from rich.progress import Progress as RichProgress
            except ImportError:
                return
            self._rich = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), transient=True)
            self._rich.start()
            self._task = self._rich.add_task("bench", total=total)

    def step(self, what: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, advance=1, description=what[:60])
        else:
            print(f"[{self.done}/{self.total}] {what}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None

"""Progress on a terminal's stderr: a bar for work over many items (validating a large
model), drawn only once it takes a while, and `Phases` for a command's long steps one
after another (a search scoring its candidates, then compiling the best). Nothing is drawn
when stderr is not a terminal.
"""

from __future__ import annotations

import time

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

# The bar appears for more items than this, or once the work has taken longer than
# PROGRESS_AFTER_S seconds.
PROGRESS_MIN_VARIABLES = 20_000
PROGRESS_AFTER_S = 1.0
_PROGRESS_STEP = 1024  # items between progress updates (and clock checks)

def with_progress(items: Sequence, enabled: bool,
                  description: str = "validating", *, step: int = _PROGRESS_STEP) -> Iterable:
    """`items`, drawing a progress bar named `description` while they are consumed, when
    `enabled` (and stderr is a terminal, and there are many or they take a while).
    `step` is how many items pass between updates: 1 for few, slow items (tensors)."""
    if not enabled:
        return items
    return _progress_iter(items, description, max(1, step))


def _progress_iter(items: Sequence, description: str, step: int = _PROGRESS_STEP):
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield from items
        return
    total = len(items)
    start = time.monotonic()
    bar = task = None
    try:
        for i, item in enumerate(items):
            if i % step == 0:
                if bar is None and (total > PROGRESS_MIN_VARIABLES or
                                    time.monotonic() - start > PROGRESS_AFTER_S):
                    bar = _progress_bar(console)
                    task = bar.add_task(description, total=total)
                    bar.start()
                if bar is not None:
                    bar.update(task, completed=i)
            yield item
    finally:
        if bar is not None:
            bar.update(task, completed=total)
            bar.stop()


def _progress_bar(console):
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeRemainingColumn)

    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeRemainingColumn(), console=console,
                    transient=True)


class Phases:
    """A long command's steps, one after another, as one line on a terminal's stderr: a
    spinner, what is being done (`phase`, its counts in its words: "compiling 2/8"; the
    `first` from the start), a bar and the time it has taken. Each phase is drawn as it starts, however short: these
    are steps a person waits on (a compile), not items. It draws nothing when not
    `enabled` or when stderr is not a terminal, and the line is gone when it ends.

    >>> with Phases(enabled=False) as progress:
    ...     progress.phase("compiling 1/1", total=None)
    ...     progress.advance()
    """

    def __init__(self, enabled: bool, first: str | None = None):
        self._bar = self._task = None
        self._first = first
        if enabled:
            from rich.console import Console

            console = Console(stderr=True)
            if console.is_terminal:
                self._bar = _phase_bar(console)

    def __enter__(self) -> "Phases":
        if self._bar is not None:
            self._bar.start()
        if self._first is not None:
            self.phase(self._first)
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()

    def phase(self, description: str, total: int | None = None) -> None:
        """Start the next step (`total` None: one call of unknown length, a pulse)."""
        if self._bar is None:
            return
        if self._task is not None:
            self._bar.remove_task(self._task)
        self._task = self._bar.add_task(description, total=total)
        self._bar.refresh()

    def advance(self, description: str | None = None, total: int | None = None) -> None:
        """One more item of the step done, and its words and total, if they changed."""
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=1, description=description, total=total)


def _phase_bar(console):
    from rich.progress import (BarColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn)

    # not markup: the words carry file names and a step's `module:attr`, `[` and all
    return Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False,
                                                style="progress.description"),
                    BarColumn(), TimeElapsedColumn(), console=console, transient=True)

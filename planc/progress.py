"""A progress bar on a terminal's stderr, for work over many items (validating a large
model). Nothing is drawn when stderr is not a terminal, nor for work that ends quickly.
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

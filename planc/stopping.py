"""Stop signals (Ctrl-C, SIGTERM, ...) as one exception, raised where it is safe.

`StopSignals` turns the first stop signal into `Stopped` where the main thread is, so
what is under way unwinds through its `finally` and `except` blocks and cleans up;
a later signal only asks to hurry, so cleanup itself is never cut short. Inside
`held()` (a call that must not be cut in the middle, such as a library writing files
from threads of its own) a signal is only recorded, and raised when the block ends.

Python drops an exception raised inside a garbage-collection callback or a `__del__`
with an "Exception ignored" traceback on stderr; `Stopped` is dropped silently there,
stays recorded, and `check()` (called between steps) raises it, so a signal is never
lost.

    >>> import os, signal
    >>> with StopSignals((signal.SIGTERM,)) as stop:
    ...     try:
    ...         os.kill(os.getpid(), signal.SIGTERM)
    ...     except Stopped as e:
    ...         print(e.signum == signal.SIGTERM, e.exit_code)
    True 143
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager

__all__ = ["Stopped", "StopSignals"]


class Stopped(KeyboardInterrupt):
    """A stop signal arrived. A `KeyboardInterrupt`, so `except Exception` in a library
    does not swallow it; `exit_code` is the shell's (128 + N: 130 for Ctrl-C, 143 for
    SIGTERM)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopSignals:
    """`signals` caught while installed (a ``with`` block, or `install` and `restore`).

    `signum` is the first signal received (None before any); `closing = True` records
    later signals without raising, for good; `hurry` says one has arrived. Handlers are
    installed only from the main thread, where Python runs them.
    """

    def __init__(self, signals=(signal.SIGINT, signal.SIGTERM)):
        self.signals = tuple(signals)
        self.signum: int | None = None
        self.closing = False
        self.previous: dict[int, object] = {}
        self._held = 0
        self._unraisable = None

    def handle(self, signum, frame):
        if self.signum is None and not self.closing and not self._held:
            self.signum = signum
            raise Stopped(signum)
        self.signum = self.signum or signum

    @property
    def hurry(self) -> bool:
        return self.signum is not None

    def check(self) -> None:
        """Raise `Stopped` for a signal received and not yet raised where it was seen
        (held, or dropped by Python inside a callback)."""
        if self.signum is not None and not self.closing:
            self.closing = True
            raise Stopped(self.signum)

    @contextmanager
    def held(self):
        """Signals in this block are recorded; the first is raised when it ends."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if not self._held:
            self.check()

    def _drop_stopped(self, unraisable) -> None:
        if isinstance(unraisable.exc_value, Stopped):
            return  # recorded in `signum`: `check()` raises it
        self._unraisable(unraisable)

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self.signals:
            self.previous[sig] = signal.signal(sig, self.handle)
        self._unraisable, sys.unraisablehook = sys.unraisablehook, self._drop_stopped

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous.clear()
        if self._unraisable is not None:
            sys.unraisablehook, self._unraisable = self._unraisable, None

    def __enter__(self) -> "StopSignals":
        self.install()
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

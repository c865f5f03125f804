"""Stop signals (Ctrl-C, SIGTERM, ...) as one exception, raised where it is safe.

`StopSignals` turns the first stop signal into `Stopped` where the main thread is, so
what is under way unwinds through its `finally` and `except` blocks and cleans up;
a later signal only asks to hurry, so cleanup itself is never cut short. Inside
`held()` (a call that must not be cut in the middle, such as a library writing files
from threads of its own) a signal is only recorded, and raised when the block ends.

Python drops an exception raised inside a garbage-collection callback, a `__del__` or a
generator being closed, with an "Exception ignored" traceback on stderr; `Stopped` is
dropped silently there, stays recorded, and `check()` (called between steps) raises it,
so a signal is never lost. Before a `StopSignals` is installed, the command line's own
Ctrl-C handler (`interrupt`) records the signal the same way, and `install` takes it
over: a Ctrl-C swallowed while `planc launch` was still loading stops the launch.

    >>> import os, signal
    >>> with StopSignals((signal.SIGTERM,)) as stop:
    ...     try:
    ...         os.kill(os.getpid(), signal.SIGTERM)
    ...     except Stopped as e:
    ...         print(e.signum == signal.SIGTERM, e.exit_code)
    True 143
"""

from __future__ import annotations

# `_signal`, the built-in half of `signal`, and `threading` imported when a handler is
# installed: the command line imports this module on every start (`interrupt`), and
# `signal`'s enums cost ~2 ms to build.
import _signal
import sys
from contextlib import contextmanager

__all__ = ["Stopped", "StopSignals", "check_interrupted", "forget", "interrupt", "interrupted",
           "quiet_interrupts"]

# The SIGINT that `interrupt` saw, until `forget` (see `interrupt`).
_arrived: int | None = None


def interrupt(signum, frame):
    """A SIGINT handler: Python's own (KeyboardInterrupt where the main thread is), that
    also records the signal, because Python drops an exception raised in a `__del__` or
    in a generator being closed, and the Ctrl-C with it. `interrupted()` and
    `StopSignals.install` find it there. `planc.cli.dispatch.main` installs it."""
    global _arrived
    _arrived = signum
    raise KeyboardInterrupt


def interrupted() -> int | None:
    """The signal `interrupt` recorded since the last `forget()`, or None."""
    return _arrived


def forget() -> None:
    """Clear `interrupt`'s record (a new command begins, or the KeyboardInterrupt was
    caught where it was raised)."""
    global _arrived
    _arrived = None


def check_interrupted() -> None:
    """Raise KeyboardInterrupt if `interrupt` recorded a Ctrl-C (one Python swallowed)."""
    if _arrived is not None:
        raise KeyboardInterrupt


def _dropping(kind: type, previous):
    """An unraisable hook that drops `kind` silently (it was recorded where it was
    raised, and a check raises it again) and hands anything else to `previous`."""
    def hook(unraisable) -> None:
        if not isinstance(unraisable.exc_value, kind):
            previous(unraisable)
    return hook


def quiet_interrupts() -> None:
    """Drop, instead of printing as "Exception ignored", a KeyboardInterrupt Python
    cannot raise (in a `__del__`, a closing generator): `interrupt` recorded it."""
    sys.unraisablehook = _dropping(KeyboardInterrupt, sys.unraisablehook)


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

    def __init__(self, signals=(_signal.SIGINT, _signal.SIGTERM)):
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

    def install(self) -> None:
        """Catch `signals` from here on; a Ctrl-C `interrupt` recorded before, and
        Python swallowed, counts as received (`check()` raises it)."""
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self.signals:
            if _signal.getsignal(sig) is _signal.SIG_IGN:
                continue  # ignored by the process (`nohup`, a background job): stays so
            self.previous[sig] = _signal.signal(sig, self.handle)
        # A `Stopped` dropped there is recorded in `signum`: `check()` raises it.
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = _dropping(Stopped, self._unraisable)
        if _arrived in self.signals and self.signum is None:
            self.signum = _arrived
            forget()

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            _signal.signal(sig, handler)
        self.previous.clear()
        if self._unraisable is not None:
            sys.unraisablehook, self._unraisable = self._unraisable, None

    def __enter__(self) -> "StopSignals":
        self.install()
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

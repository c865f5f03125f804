"""How a process of a multi-process job ends: in one line, at once, whatever it was doing.

Under `srun -n 8` every process prints its own traceback, eight times the same; and a
process that fails or is interrupted while the others wait for it in a collective makes
the whole job hang. From `plan.initialize()` on (multi-process only):

- an uncaught `ClusterError` prints `planc: cluster error: MESSAGE [CODE]` and nothing
  else; exit 1;
- Ctrl-C (SIGINT, which `srun` passes on to every task before it kills them half a
  second later) prints `planc: cluster: process I of N interrupted (SIGINT); exiting`
  and exits 130 at once, also when the main thread is blocked inside JAX and can run no
  Python handler: a thread woken by the signal ends the process. A job of several
  processes stops on Ctrl-C (SIGTERM, the scheduler's notice, is left to JAX);
- once the runtime is up, any other uncaught exception prints its traceback and ends the
  process at once, instead of JAX's exit handler waiting minutes for the others.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

EXIT_INTERRUPTED = 130
# Process 0 hosts the coordinator: a process that sees it vanish is aborted by JAX with
# a C++ stack trace. So when the job ends, process 0 goes this much after the others;
# after a Ctrl-C, which every process received at once, only a moment.
LAST_TO_LEAVE = 2.5
LAST_AFTER_INTERRUPT = 0.25

_state = {"where": "", "coordinator": False, "started": False, "hooked": False,
          "interrupt": False, "ending": None, "since": None}
_ending = threading.Lock()


def say(text: str) -> None:
    """`text` as one line on stderr, after whatever the program printed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or broken stream: the line below may still get out
            pass
    try:
        os.write(2, (text + "\n").encode(errors="replace"))
    except OSError:
        pass


def announce(line: str, code: int) -> None:
    """The process is ending with `code`: print `line`, once, whoever says it first;
    from now on whatever fails (a collective whose peer is gone) prints nothing more."""
    with _ending:
        if _state["ending"] is None:
            _state["ending"] = code
            _state["since"] = time.monotonic()
            say(line)


def end(line: str, code: int, last: float = LAST_TO_LEAVE) -> None:
    """`announce(line, code)`, then exit: process 0 of a running cluster last."""
    announce(line, code)
    if _state["started"] and _state["coordinator"]:
        time.sleep(max(_state["since"] + last - time.monotonic(), 0))
    os._exit(_state["ending"])


def _interrupted_line() -> str:
    return f"planc: cluster: {_state['where'] or 'this process'} interrupted (SIGINT); exiting"


def _hook(previous):
    from planc.multihost.spec import ClusterError

    def hook(kind, value, tb):
        if _state["ending"] is not None:
            end("", _state["ending"])
        if isinstance(value, ClusterError):
            end(f"planc: cluster error: {value} [{value.code}]", 1)
        if isinstance(value, KeyboardInterrupt):
            end(_interrupted_line(), EXIT_INTERRUPTED, LAST_AFTER_INTERRUPT)
        try:
            previous(kind, value, tb)
        finally:
            if _state["started"]:
                end(f"planc: cluster: an uncaught exception ends "
                    f"{_state['where'] or 'this process'} (exit 1)", 1)
    return hook


def install(where: str, coordinator: bool = False) -> None:
    """One-line endings for this process, `where` naming it (`process 1 of 2`);
    `coordinator`: it is process 0."""
    _state["where"], _state["coordinator"] = where, coordinator
    if not _state["hooked"]:
        sys.excepthook = _hook(sys.excepthook)
        _state["hooked"] = True
        # Python's own Ctrl-C, raised once: a second SIGINT (srun forwards each Ctrl-C,
        # and people press it twice) would otherwise land inside the hook above, which
        # then prints a traceback of its own instead of the one line. The first one's
        # byte on the wakeup fd (`joining`) still ends the process.
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupt_once)


def _interrupt_once(signum, frame):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def joining() -> None:
    """Every process has arrived and the runtime starts: Ctrl-C now ends the process."""
    if not _state["interrupt"] and threading.current_thread() is threading.main_thread():
        _watch_interrupts()


def started() -> None:
    """The runtime is up: an uncaught exception now ends the process at once."""
    _state["started"] = True


def _watch_interrupts() -> None:
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        return  # SIGINT ignored or left to the system: not ours to change
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:
        os.close(read)
        os.close(write)
        return
    if previous != -1:  # someone (asyncio) wakes on signals already: leave it theirs
        signal.set_wakeup_fd(previous)
        os.close(read)
        os.close(write)
        return
    _state["interrupt"] = True

    def watch():
        while True:
            try:
                got = os.read(read, 64)
            except OSError:
                return
            if not got:
                return
            if signal.SIGINT in got:
                # Whether or not the main thread could take it (blocked inside JAX, it
                # runs no Python handler until the collective ends: never, here).
                end(_interrupted_line(), EXIT_INTERRUPTED, LAST_AFTER_INTERRUPT)

    threading.Thread(target=watch, name="planc-interrupt", daemon=True).start()

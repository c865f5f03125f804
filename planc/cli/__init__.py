"""The `planc` command line: `main` parses and dispatches (`planc.cli.dispatch`), one module
per command.

`main` is where the `planc` process starts (the console script, and `python -m planc`
through `planc/__main__.py`). The tricks that make the command start quickly and
quietly live here, in the entry point, because they are the process's business and not a
library's: `import planc` installs no signal handler and changes nothing of argparse.

1. Ctrl-C while the modules load ends the command quietly, with the shell's exit code
   (128 + SIGINT), instead of in a traceback: Python's own handler raises
   KeyboardInterrupt wherever the signal lands, deep in an import. `main` sets a handler
   that exits at once before it imports anything, through `_signal`, the built-in half
   of `signal` (importing `signal` itself builds its enums, long enough for a Ctrl-C to
   land in the middle of it). Once the command's modules are loaded,
   `planc.cli.dispatch.main` puts Python's own handler back and reports a
   KeyboardInterrupt the same way.
2. argparse makes a help formatter in each `add_argument` only to check the argument's
   metavar, and the default formatter measures the terminal for it, which imports
   `shutil` (~2 ms of every start-up). `planc.cli.quick_formatting.QuickFormatting`,
   mixed into the command line's parser, hands those formatters a fixed width instead:
   help and usage are still formatted at the terminal's.

3. The cyclic collector is paused while the command line's modules load: they build
   thousands of objects that live to the end and hold no garbage, and the collector's
   passes over them were ~2-4% of a `planc lint`. `planc.cli.dispatch` keeps it paused
   for a one-shot command, and turns it back on for any other before the command runs.

All three are for the process alone: `main(argv)` called with its words, from a program
or a test, sets no handler and leaves the collector as it is.
"""

import _signal
import gc
import os


def _interrupted_at_start(signum, frame):
    os.write(2, b"planc: interrupted\n")
    os._exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: this process's arguments); its exit code."""
    if argv is None:  # the process's own command line: tricks 1 and 3 above
        try:
            if _signal.getsignal(_signal.SIGINT) is not _signal.SIG_IGN:  # ignored stays so
                _signal.signal(_signal.SIGINT, _interrupted_at_start)
        except ValueError:  # not the main thread, whose signals are not this call's to set
            pass
        gc.disable()
    from planc.cli.dispatch import main as dispatch

    return dispatch(argv)


__all__ = ["main"]

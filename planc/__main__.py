"""`python -m planc`: the command line, from its entry point (`planc.cli.main`, whose
docstring says what it does first and why)."""

import _signal

# Until `main` sets its own handler, a Ctrl-C ends the process as the signal does (the
# shell reports 130), instead of raising KeyboardInterrupt in the middle of importing
# `planc.cli`; `_signal`, not `signal`, whose enums take long enough to build for the
# signal to land in them. A Ctrl-C the process ignores stays ignored.
if _signal.getsignal(_signal.SIGINT) is not _signal.SIG_IGN:
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)

import sys  # noqa: E402

from planc.cli import main  # noqa: E402

sys.exit(main())

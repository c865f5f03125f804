"""`SourceProblem`: a source that cannot be read or a command line that cannot be met.

It is one line for the user (the CLI prints it and exits 2); everything wrong *inside*
a readable source is a located `Diagnostic` instead, raised in a `PlanError`.
"""

from __future__ import annotations


from planc.diagnostics import InputError


class SourceProblem(InputError):
    """An unreadable source, or options that do not fit it: one line, exit 2 (an
    `InputError`)."""

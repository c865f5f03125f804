"""`planc code CODE`: what a diagnostic code reports, why it matters, an example, the fix.

The text is the registry's (`planc.diagnostics.docs`), the same docs/diagnostics.md's code table
is generated from. Without a code, every code and its one-line title.
"""

from __future__ import annotations

import sys

from planc.cli.common import EXIT_OK, UsageError
from planc.diagnostics import CODES
from planc.diagnostics.did_you_mean import closest
from planc.diagnostics.docs import DOCS, describe


def run(args) -> int:
    """Run `planc code` for parsed `args`; returns the exit code."""
    if args.code is None:
        sys.stdout.write("".join(f"{c}  {CODES[c]}\n" for c in sorted(CODES)))
        return EXIT_OK
    code = args.code.strip().upper()
    if code not in DOCS:
        near = closest(code, DOCS)
        hint = f"; did you mean {near}?" if near else "; `planc code` lists every code"
        raise UsageError(f"no diagnostic code `{args.code}`{hint}")
    sys.stdout.write(describe(code))
    return EXIT_OK

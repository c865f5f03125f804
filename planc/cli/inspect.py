"""`planc inspect SRC [-o FILE]`: a model's variables, written as a planc manifest."""

from __future__ import annotations

import sys

from planc.cli.common import EXIT_OK, UsageError, load_variables, wrote


def run(args) -> int:
    from planc.sources import SourceError, write_manifest

    variables = load_variables(args.source)
    try:
        write_manifest(variables, args.output or sys.stdout, source=args.source)
    except SourceError as exc:  # the output cannot be written
        raise UsageError(str(exc)) from None
    if args.output:
        wrote(args.output)
    return EXIT_OK

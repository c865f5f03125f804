"""`planc lint PLAN... [--model SRC] [--checkpoint CKPT] [--devices N,...]`: the plans'
checks, in CI or by hand; with `--checkpoint`, a checkpoint checked against the plan's
`rename` rules (and the model) from its headers alone."""

from __future__ import annotations

import sys

from planc.cli.common import (EXIT_USAGE, emit_diagnostics, exit_code, load_model, parse_defines,
                              parse_devices)


def run(args) -> int:
    from planc.reports.lint import lint_plans

    defines = parse_defines(args.defines)
    counts = parse_devices(args.devices)
    variables = load_model(args.model) if args.model else None
    diags, sources, unreadable = lint_plans(
        sorted(set(args.plans)), defines, counts, variables,
        allow_include_outside=args.allow_include_outside,
        progress=args.format == "text" and sys.stderr.isatty(),
        checkpoint=args.checkpoint, strict=args.strict)
    emit_diagnostics(diags, sources, args)
    for reason in unreadable:
        print(f"planc: {reason}", file=sys.stderr)
    return EXIT_USAGE if unreadable else exit_code(diags, args.strict)

"""`planc import SRC [-o PLAN.kd] [--from flax|maxtext] [--mesh ...] [--head ...]
[--keras-version X.Y] [--model MSRC] [--devices N]`: a plan from what a user already has.

The plan goes to stdout, or atomically to `-o`; warnings go to stderr. Exit 0 (written),
1 (the source has faults, or the plan does not give the model the source's layouts:
nothing is written), 2 (an unreadable source or options that do not fit it).
"""

from __future__ import annotations

import sys

from planc.cli.common import EXIT_OK, UsageError, emit_diagnostics, write_output


def run(args) -> int:
    from planc.importing import SourceProblem, import_plan

    devices = None
    if args.devices is not None:
        if not args.devices.isdigit() or int(args.devices) <= 0 or len(args.devices) > 12:
            raise UsageError(f"--devices expects a positive integer, got `{args.devices}`")
        devices = int(args.devices)
    try:
        imported = import_plan(args.source, mesh=args.mesh, head=args.head,
                               keras_version=args.keras_version, model=args.model,
                               devices=devices, command=_command(args), file=args.output,
                               source_kind=args.source_kind, layers=_layers(args.layers))
    except SourceProblem as exc:
        raise UsageError(str(exc)) from None
    if imported.diagnostics:
        emit_diagnostics(list(imported.diagnostics), imported.sources, args, stream=sys.stderr,
                         to_file=False)
    write_output(imported.text, args.output)
    return EXIT_OK


def _layers(text):
    if text is None:
        return None
    if not text.isdigit() or int(text) <= 0 or len(text) > 9:
        raise UsageError(f"--layers expects a positive integer, got `{text}`")
    return int(text)


def _command(args) -> str:
    # The header of the plan records how it was made; where it was written, and the
    # model it was proved against, do not change it.
    parts = ["planc import", f'"{args.source}"' if args.source_kind == "megatron"
             else args.source]
    for flag, value in (("--from", args.source_kind), ("--layers", args.layers),
                        ("--mesh", args.mesh), ("--head", args.head),
                        ("--keras-version", args.keras_version), ("--devices", args.devices)):
        if value is not None:
            parts.append(f"{flag} {value}")
    return " ".join(parts)

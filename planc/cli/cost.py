"""`planc cost PLAN --step MODULE:ATTR --topology NAME [--calibration FILE] [--chip NAME]
[-D NAME=VALUE] [--no-donate] [--format text|json|html] [-o FILE]`: how fast the training step
runs on the topology, predicted from the compile `planc aot` makes (the step built and
compiled by `planc.targets.aot.step_builder`, costed by `planc.targets.cost`); this module
reads the command line and prints.

`planc cost PLAN --calibrate FILE --step A [--step B ...] [--repeat N] [--chip NAME]`
runs each step on the chip attached to this machine and writes the fitted calibration
to FILE (`planc.targets.cost.calibrate`); it prints each step's measured and fitted
times.

Exit codes: 0 costed (and within `budget(step)` and `budget(peak)`) or calibrated, 1 the
plan, the step or a budget has an error, or a step cannot be measured, 2 a bad command
line or input, or no chip attached (P819).
"""

from __future__ import annotations

import os
import sys

from planc.cli.common import (EXIT_PLAN, EXIT_USAGE, UsageError, compiling, emit_diagnostics,
                              exit_code, load, parse_defines, prepare_jax, write_output)
from planc.diagnostics import PlanError

_USAGE_CODES = frozenset({"P801", "P802", "P811", "P812", "P815", "P819"})


def run(args) -> int:
    """Run `planc cost` for parsed `args`; returns the exit code."""
    steps = args.step or []
    if args.calibrate is not None:
        if args.topology is not None:
            raise UsageError("--calibrate runs the steps on the chip attached to this machine; "
                             "it takes no --topology")
        if not steps:
            raise UsageError("--calibrate needs at least one --step to measure")
        if args.repeat < 1:
            raise UsageError(f"--repeat must be at least 1, got {args.repeat}")
        if args.format == "html":
            raise UsageError("--calibrate prints text or json (--format text|json)")
    elif len(steps) != 1 or args.topology is None:
        raise UsageError("planc cost takes one --step and a --topology (several --step only "
                         "with --calibrate)")
    plan, found, sources = load(args.plan, parse_defines(args.defines),
                                args.allow_include_outside)
    if plan is None:
        emit_diagnostics(found, sources, args, stream=sys.stderr, to_file=False)
        return exit_code(found)
    if args.calibrate is not None:
        return _calibrate(args, plan, found, sources)
    prepare_jax(args.topology)
    from planc.targets.cost.chip_budget import budget_past_topology

    found = found + budget_past_topology(plan.ir, args.topology)  # P822, as lint says it
    from planc.targets.aot.step_builder import compile_named_step
    from planc.targets.cost.estimate import cost_of

    from planc.targets.cost.calibration import read_before_compile

    try:
        # A bad calibration file is refused before the compile, not after it.
        calibration = read_before_compile(args.calibration, plan.ir, args.topology, args.chip)
        with compiling(args):
            compiled, built = compile_named_step(plan.ir, steps[0], args.topology,
                                                 donate=not args.no_donate,
                                                 plan_of=lambda ir: plan)
        report = cost_of(plan.ir, compiled, calibration=calibration, chip=args.chip)
    except PlanError as exc:
        diags = found + list(exc.diagnostics)
        as_json = args.format == "json"
        emit_diagnostics(diags, {**sources, **exc.sources}, args,
                         stream=sys.stdout if as_json else sys.stderr, to_file=as_json)
        return EXIT_USAGE if any(d.code in _USAGE_CODES for d in diags) else EXIT_PLAN
    diags = found + list(report.diagnostics)
    from planc.reports import cost as rendering

    if args.format == "html":
        from planc.targets.aot.step_builder import parameter_variables

        write_output(rendering.page(plan, report, diags,
                                    parameter_variables(plan.ir, built.params)), args.output)
        if diags:
            emit_diagnostics(diags, {**sources, **report.sources}, args, stream=sys.stderr,
                             to_file=False)
    elif args.format == "json":
        import json

        write_output(json.dumps(rendering.document(report, diags), indent=2,
                                ensure_ascii=False) + "\n", args.output)
    else:
        write_output(rendering.render_text(report), args.output)
        if diags:
            emit_diagnostics(diags, {**sources, **report.sources}, args, stream=sys.stderr,
                             to_file=False)
    return exit_code(diags)


def _calibrate(args, plan, found, sources) -> int:
    # The chip is what is measured: the platform is left as JAX finds it (no `cpu`).
    os.environ.setdefault("KERAS_BACKEND", "jax")  # a step module may import Keras
    import json

    from planc.targets.cost.calibrate import calibrate

    try:
        measured = calibrate(plan.ir, args.step, repeats=args.repeat, chip=args.chip,
                             donate=not args.no_donate, plan_of=lambda ir: plan)
    except PlanError as exc:
        diags = found + list(exc.diagnostics)
        emit_diagnostics(diags, {**sources, **exc.sources}, args, stream=sys.stderr,
                         to_file=False)
        return EXIT_USAGE if any(d.code in _USAGE_CODES for d in diags) else EXIT_PLAN
    document = measured.document()
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    write_output(text, args.calibrate)
    from planc.reports import cost as rendering

    if args.format == "json":
        write_output(text, args.output)
    else:
        write_output(rendering.render_calibration(document, args.calibrate), args.output)
    return exit_code(found)

"""`planc aot PLAN --step MODULE:ATTR --topology NAME [-D NAME=VALUE] [--no-donate]
[--format text|json|html] [-o FILE]`: will the training step fit, on the cluster it will
run on, compiled here with no accelerator. `--format html` writes the page of the report
(`planc.reports.html`), with the parameters' layouts as `planc explain` gives them.

The step is built and compiled by the AOT wing (`planc.targets.aot.step_builder`); this
module reads the command line and prints. JAX is imported only when the command runs:
with `JAX_PLATFORMS=cpu` unless set, and `cpu:N`'s N devices simulated.

Exit codes: 0 compiled (and within `budget(peak)`), 1 the plan, the step or the budget
has an error, 2 a bad command line or input (an unknown topology, libtpu missing, a
`--step` that cannot be imported or called, `budget(peak)` without `--topology`).
"""

from __future__ import annotations

import sys

from planc.cli.common import (EXIT_PLAN, EXIT_USAGE, UsageError, compiling, emit_diagnostics,
                              exit_code, load, parse_defines, prepare_jax, write_output)
from planc.diagnostics import PlanError

# Input problems: exit 2, as an unreadable model is for `planc lint`.
_USAGE_CODES = frozenset({"P532", "P801", "P802", "P808", "P811"})


def run(args) -> int:
    """Run `planc aot` for parsed `args`; returns the exit code."""
    defines = parse_defines(args.defines)
    plan, found, sources = load(args.plan, defines, args.allow_include_outside)
    if plan is None:
        emit_diagnostics(found, sources, args, stream=sys.stderr, to_file=False)
        return exit_code(found)
    if args.topology is None:
        budget = plan.ir.budget
        if budget is not None and budget.peak is not None:
            from planc.targets.aot.budget import no_topology

            emit_diagnostics(found + [no_topology(plan.ir)], sources, args, stream=sys.stderr,
                             to_file=False)
            return EXIT_USAGE
        raise UsageError("planc aot needs --topology NAME: a TPU topology such as v5e:2x4 "
                         "(needs planc[tpu]), or cpu:N for N simulated CPU devices")
    prepare_jax(args.topology)
    from planc.targets.cost.chip_budget import budget_past_topology

    found = found + budget_past_topology(plan.ir, args.topology)  # P822, as lint says it
    from planc.reports.html import refuse_too_many
    from planc.targets.aot.step_builder import compile_named_step

    try:
        with compiling(args):
            report, built = compile_named_step(
                plan.ir, args.step, args.topology, donate=not args.no_donate,
                plan_of=lambda ir: plan, inspect=(lambda built: refuse_too_many(built.parameter_count, args.step))
                if args.format == "html" else None)
    except PlanError as exc:
        diags = found + list(exc.diagnostics)
        as_json = args.format == "json"  # the JSON document, to stdout or -o
        emit_diagnostics(diags, {**sources, **exc.sources}, args,
                         stream=sys.stdout if as_json else sys.stderr, to_file=as_json)
        return EXIT_USAGE if any(d.code in _USAGE_CODES for d in diags) else EXIT_PLAN
    diags = found + list(report.diagnostics)
    from planc.reports import aot as rendering

    if args.format == "html":
        from planc.targets.aot.step_builder import parameter_variables

        parameters = parameter_variables(plan.ir, built.params)
        write_output(rendering.page(plan, report, diags, parameters), args.output)
    elif args.format == "json":
        import json

        write_output(json.dumps(rendering.document(report, diags), indent=2,
                                ensure_ascii=False) + "\n", args.output)
    else:
        write_output(rendering.render_text(report), args.output)
    if diags and args.format != "json":
        emit_diagnostics(diags, {**sources, **report.sources}, args, stream=sys.stderr,
                         to_file=False)
    return exit_code(diags)

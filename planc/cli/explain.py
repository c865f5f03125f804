"""`planc explain PLAN [--model SRC] [--devices N] [--var PATH] [--format text|json|html]
[-o FILE]`.

Without `--model`, the plan's own model (`model "PATH"`) or its `[tool.planc]` entry's,
as `planc lint` finds it. `-o` writes any format to FILE, atomically.

The layout every variable gets, what it costs, and why (`planc.reports.explain`), or,
with `--var`, how one variable is resolved (`planc.resolve.tracing`). `--format html`
writes the page of it all (`planc.reports.html`), opened on `--var`'s variable. Exit
codes as `planc lint`: 0 clean, 1 errors, 2 a bad command line or unreadable input (or
a model too large for the page, P532).
"""

from __future__ import annotations

import json
import sys

from planc.cli.common import (EXIT_USAGE, UsageError, emit_diagnostics, exit_code, load,
                              load_variables, parse_defines, parse_devices, use_color,
                              write_output)
from planc.diagnostics import Diagnostic
from planc.diagnostics.did_you_mean import similar
from planc.variables import Variable


def run(args) -> int:
    """Run `planc explain` for parsed `args`; returns the exit code."""
    from planc.reports.explain import (document, trace_text, variable_row,
                                       variables_pieces)
    from planc.resolve import trace_in_report, validate

    defines = parse_defines(args.defines)
    counts = parse_devices(args.devices)
    html = args.format == "html"
    if len(counts) > 1:
        raise UsageError(f"explain takes one device count, got `{args.devices}`; "
                         "use `planc lint --devices` to check several")
    devices = counts[0] if counts else None
    plan, found, sources = load(args.plan, defines, args.allow_include_outside)
    if plan is None:  # on stdout: -o names the document, which a broken plan has none of
        emit_diagnostics(found, sources, args, to_file=False)
        return exit_code(found)
    model = _model_of(plan, args)
    variables = load_variables(model)
    var = _find(variables, args.var) if args.var is not None else None
    if html:  # the page's module (and what it imports) only for a page
        from planc.reports.html import MAX_PAGE_VARIABLES, explain_page, too_many_variables
    if html and len(variables) > MAX_PAGE_VARIABLES:
        emit_diagnostics(list(found) + [too_many_variables(len(variables), model)],
                         sources, args, stream=sys.stderr, to_file=False)
        return EXIT_USAGE
    progress = args.format == "text" and sys.stderr.isatty()
    report = validate(plan.ir, variables, devices, progress=progress)
    sources = {**sources, **report.sources}
    color = use_color(args.color, sys.stdout)

    if html:
        diags = sorted(list(found) + list(report.diagnostics), key=Diagnostic.sort_key)
        # A plan that does not fit the device count has no layouts: the model's rows alone.
        rows = report.variable_dicts() if report.assignments else \
            [variable_row(report, v) for v in variables]
        doc = document(plan, report, diags, rows)
        slices = {a.name: a.slices for a in plan.ir.mesh.axes}
        _write(explain_page(doc, slices=slices, distribution=plan.ir.distribution,
                            selected=None if var is None else var.path), args)
        if diags:
            emit_diagnostics(diags, sources, args, stream=sys.stderr, to_file=False)
        return exit_code(diags)
    if var is not None:
        diags, info = trace_in_report(report, var, devices)
        diags = sorted(list(found) + diags, key=Diagnostic.sort_key)
        if args.format == "json":
            doc = document(plan, report, diags, [variable_row(report, var)])
            doc["trace"] = info
            _write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", args)
        else:
            _write(trace_text(plan, report, info, color and not args.output), args)
            emit_diagnostics(diags, sources, args, stream=sys.stderr if args.output else None)
        return exit_code(diags)

    diags = sorted(list(found) + list(report.diagnostics), key=Diagnostic.sort_key)
    if args.format == "json":
        doc = document(plan, report, diags, report.variable_dicts())
        _write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", args)
        return exit_code(diags)
    if args.output:  # the table into the file, whole; the diagnostics to stderr
        _write("".join(variables_pieces(plan, report, False)), args)
        if diags:
            emit_diagnostics(diags, sources, args, stream=sys.stderr, to_file=False)
        return exit_code(diags)
    # A blank line between the summary and the diagnostics.
    pieces = variables_pieces(plan, report, color)
    _write_pieces(pieces + ["\n"] if diags else pieces)
    if diags:
        emit_diagnostics(diags, sources, args)
    return exit_code(diags)


def _model_of(plan, args) -> str:
    """The model source: `--model`, else the plan's `model`, else its `[tool.planc]`
    entry's; UsageError when there is none."""
    if args.model is not None:
        return args.model
    from planc.sources.project import project_for

    source = plan.ir.model or project_for(plan.ir.file).model
    if source is None:
        raise UsageError(f"{args.plan} names no model: pass --model SRC (or add "
                         '`model "PATH"` to the plan)')
    return source


def _write_pieces(pieces: list[str]) -> None:
    """Onto standard output, piece by piece (a large table is not joined first)."""
    for piece in pieces[:-1]:
        sys.stdout.write(piece)
    write_output(pieces[-1] if pieces else "", None)


def _write(text: str, args=None) -> None:
    # With -o: the table, the JSON document (a golden for `planc lint --golden`), or the
    # page, written whole.
    write_output(text, getattr(args, "output", None))


def _find(variables, path: str) -> Variable:
    for v in variables:
        if v.path == path:
            return v
    close = similar(path, [v.path for v in variables])
    hint = ("; did you mean " + ", ".join(f"`{c}`" for c in close) + "?") if close else \
        "; `planc inspect SRC` lists the variables"
    raise UsageError(f"the model has no variable `{path}`{hint}")

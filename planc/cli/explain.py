"""`planc explain PLAN --model SRC [--devices N] [--var PATH] [--format text|json|html]`.

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
    if getattr(args, "output", None) and not html and (args.format != "json"
                                                        or args.var is not None):
        raise UsageError("explain -o writes the JSON table or the HTML page: add --format json "
                         "(without --var) or --format html")
    if len(counts) > 1:
        raise UsageError(f"explain takes one device count, got `{args.devices}`; "
                         "use `planc lint --devices` to check several")
    devices = counts[0] if counts else None
    plan, found, sources = load(args.plan, defines, args.allow_include_outside)
    if plan is None:  # on stdout: -o names the document, which a broken plan has none of
        emit_diagnostics(found, sources, args, to_file=False)
        return exit_code(found)
    variables = load_variables(args.model)
    var = _find(variables, args.var) if args.var is not None else None
    if html:  # the page's module (and what it imports) only for a page
        from planc.reports.html import MAX_PAGE_VARIABLES, explain_page, too_many_variables
    if html and len(variables) > MAX_PAGE_VARIABLES:
        emit_diagnostics(list(found) + [too_many_variables(len(variables), args.model)],
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
            _write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        else:
            _write(trace_text(plan, report, info, color))
            emit_diagnostics(diags, sources, args)
        return exit_code(diags)

    diags = sorted(list(found) + list(report.diagnostics), key=Diagnostic.sort_key)
    if args.format == "json":
        doc = document(plan, report, diags, report.variable_dicts())
        _write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", args)
        return exit_code(diags)
    # A blank line between the summary and the diagnostics.
    pieces = variables_pieces(plan, report, color)
    _write_pieces(pieces + ["\n"] if diags else pieces)
    if diags:
        emit_diagnostics(diags, sources, args)
    return exit_code(diags)


def _write_pieces(pieces: list[str]) -> None:
    """Onto standard output, piece by piece (a large table is not joined first)."""
    for piece in pieces[:-1]:
        sys.stdout.write(piece)
    write_output(pieces[-1] if pieces else "", None)


def _write(text: str, args=None) -> None:
    # With -o: the JSON document (a golden for `planc lint --golden`), or the page.
    write_output(text, getattr(args, "output", None))


def _find(variables, path: str) -> Variable:
    for v in variables:
        if v.path == path:
            return v
    close = similar(path, [v.path for v in variables])
    hint = ("; did you mean " + ", ".join(f"`{c}`" for c in close) + "?") if close else \
        "; `planc inspect SRC` lists the variables"
    raise UsageError(f"the model has no variable `{path}`{hint}")

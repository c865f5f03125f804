"""`planc diff OLD NEW [--model SRC] [--devices N] [--format text|json] [--cost --step
MODULE:ATTR --topology NAME]`: what changed.

OLD and NEW are plan files (resolved against `--model`, else each plan's own model) or
`planc explain --format json` documents. Lists each variable whose layout, shard shape
or bytes per device changed, those newly replicated, axes renamed with every shard in
place, and the per-device totals (`planc.reports.diff`). `-D NAME=VALUE` overrides the
parameter in each plan that declares it (a name neither declares is P109, as in lint).
With `--cost`, the step is compiled under each plan for the topology and costed: the
change of the peak, of the bytes sent per mesh axes and of the step time
(`planc.reports.cost.cost_diff`, `cost` in the JSON).
Exit codes as diff(1): 0 identical, 1 different, 2 trouble (a bad command line, an
unreadable input, a plan with errors).
"""

from __future__ import annotations

import json

from planc.cli.common import (EXIT_USAGE, UsageError, emit_diagnostics, load, load_variables,
                              parse_defines, parse_devices, write_output)


def run(args) -> int:
    """Run `planc diff` for parsed `args`; returns the exit code."""
    from planc.reports.diff import diff_document, diff_text

    defines = parse_defines(args.defines)
    counts = parse_devices(args.devices)
    if len(counts) > 1:
        raise UsageError(f"diff takes one device count, got `{args.devices}`")
    devices = counts[0] if counts else None
    if devices is None:  # a plan beside an explain document is resolved at its count
        from planc.reports.diff import GoldenError, read_document

        for path in (args.old, args.new):
            if _is_document(path):
                try:
                    written = read_document(path).get("devices")
                except GoldenError as exc:
                    raise UsageError(str(exc)) from None
                devices = written if isinstance(written, int) else None
                break
    declared = {path: _declared(path, args.allow_include_outside)
                for path in (args.old, args.new) if not _is_document(path)}
    anywhere = set().union(*declared.values()) if declared else set()
    if args.cost and args.model is None:
        # The step is the model: its parameters are what both plans lay out.
        costed = _cost(args, defines, declared, anywhere)
        if not isinstance(costed, dict):
            return costed
        from planc.reports.cost import cost_diff_text

        write_output(json.dumps({"cost": costed}, indent=2, ensure_ascii=False) + "\n"
                     if args.format == "json" else cost_diff_text(costed), args.output)
        return 1 if _cost_changed(costed) else 0
    docs = []
    for path in (args.old, args.new):
        doc, problems = _document(path, args, _defines_for(path, defines, declared, anywhere),
                                  devices)
        if doc is None:
            emit_diagnostics(problems[0], problems[1], args, to_file=False)
            return EXIT_USAGE
        docs.append(doc)
    doc = diff_document(*docs)
    costed = _cost(args, defines, declared, anywhere) if args.cost else None
    if costed is not None and not isinstance(costed, dict):
        return costed  # an exit code: the compile's problems are printed
    if costed is not None:
        doc["cost"] = costed
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n" if args.format == "json" \
        else diff_text(doc)
    if costed is not None and args.format != "json":
        from planc.reports.cost import cost_diff_text

        text += "\n" + cost_diff_text(costed)
    write_output(text, args.output)
    changed = not doc["identical"] or (costed is not None and _cost_changed(costed))
    return 1 if changed else 0


def _defines_for(path: str, defines: dict, declared: dict, anywhere: set) -> dict:
    """The overrides that apply to plan `path`: an override applies where its parameter
    exists, so a plan that gained or lost a parameter can be compared with the one that
    has it. A name no plan declares is passed on, so the checker reports it (P109) with
    its did-you-mean."""
    return {k: v for k, v in defines.items() if k in declared.get(path, ()) or k not in anywhere}


def _cost_changed(costed: dict) -> bool:
    return bool(costed["peak"]["delta"] or costed["time"]["estimate_s"]["delta"]
                or any(row["delta"] for row in costed["bytes_per_axes"]))


def _cost(args, defines, declared, anywhere):
    """`--cost`: both plans' steps compiled for `--topology` and costed, and what changed
    (`planc.reports.cost.cost_diff`); an exit code when a plan or the step has errors."""
    if not args.step or not args.topology:
        raise UsageError("--cost needs --step MODULE:ATTR and --topology NAME")
    if any(_is_document(p) for p in (args.old, args.new)):
        raise UsageError("--cost compares two plan files, not explain documents")
    import sys

    from planc.cli.common import EXIT_PLAN, prepare_jax
    from planc.diagnostics import PlanError

    prepare_jax(args.topology)
    from planc.reports.cost import cost_diff
    from planc.targets.aot.step_builder import compile_named_step
    from planc.targets.cost.estimate import cost_of

    reports = []
    for path in (args.old, args.new):
        plan, found, sources = load(path, _defines_for(path, defines, declared, anywhere),
                                    args.allow_include_outside)
        if plan is None:
            emit_diagnostics(found, sources, args, stream=sys.stderr, to_file=False)
            return EXIT_USAGE
        try:
            compiled, _ = compile_named_step(plan.ir, args.step, args.topology,
                                             plan_of=lambda ir, plan=plan: plan)
            reports.append(cost_of(plan.ir, compiled))
        except PlanError as exc:
            emit_diagnostics(list(exc.diagnostics), {**sources, **exc.sources}, args,
                             stream=sys.stderr, to_file=False)
            return EXIT_PLAN
    return cost_diff(*reports)


def _is_document(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(64).lstrip().startswith(b"{")
    except OSError:
        return False


def _declared(path: str, allow_outside: bool) -> set[str]:
    """The parameters the plan file `path` and its includes declare; empty when it cannot
    be read or parsed (loading it then says why)."""
    from planc.diagnostics import PlanError
    from planc.syntax.files import read_plan_text
    from planc.syntax.includes import collect

    try:
        statements = collect(read_plan_text(path), path,
                             allow_include_outside=allow_outside).statements
    except (OSError, PlanError):
        return set()
    return {stmt.name.text for stmt in statements.params}


def _document(path: str, args, defines: dict, devices: int | None):
    """(the `planc.explain/1` document of `path`, None) or (None, (diagnostics, sources))."""
    from planc.reports.diff import GoldenError, read_document
    from planc.reports.explain import document
    from planc.resolve import validate
    from planc.sources.project import project_for

    if _is_document(path):
        try:
            return read_document(path), None
        except GoldenError as exc:
            raise UsageError(str(exc)) from None
    plan, found, sources = load(path, defines, args.allow_include_outside)
    if plan is None:
        return None, (found, sources)
    entry = project_for(path)
    source = args.model or plan.ir.model or entry.model
    if source is None:
        raise UsageError(f"{path} names no model: pass --model SRC (or add "
                         "`model \"PATH\"` to the plan)")
    if devices is None and len(entry.devices) == 1:
        devices = entry.devices[0]
    report = validate(plan.ir, load_variables(source), devices)
    diags = list(found) + list(report.diagnostics)
    if any(d.is_error for d in diags):
        return None, (diags, {**sources, **report.sources})
    return document(plan, report, diags, report.variable_dicts()), None

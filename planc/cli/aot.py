"""`planc aot PLAN --step MODULE:ATTR --topology NAME [-D NAME=VALUE] [--no-donate]
[--format text|json|html] [-o FILE]`: will the training step fit, on the cluster it will
run on, compiled here with no accelerator. `--format html` writes the page of the report
(`planc.reports.html`), with the parameters' layouts as `planc explain` gives them.

`MODULE:ATTR` names a zero-argument callable returning `(step, params, opt_state,
batch)`. It is called under `jax.eval_shape`, so the arrays it builds are never
allocated (called plainly when that fails, or when the step needs values it made);
importing the module runs its code. JAX is imported only here, when the command runs:
with `JAX_PLATFORMS=cpu` unless set (the step is compiled for the topology, never run,
and an attached accelerator is left alone), and `cpu:N`'s N devices simulated.

Exit codes: 0 compiled (and within `budget(peak)`), 1 the plan, the step or the budget
has an error, 2 a bad command line or input (an unknown topology, libtpu missing, a
`--step` that cannot be imported, `budget(peak)` without `--topology`).
"""

from __future__ import annotations

import os
import re
import sys

from planc.cli.common import (EXIT_PLAN, EXIT_USAGE, UsageError, emit_diagnostics, exit_code,
                              load, parse_defines, write_output)
from planc.diagnostics import Diagnostic, PlanError, error

# Input problems: exit 2, as an unreadable model is for `planc lint`.
_USAGE_CODES = frozenset({"P801", "P802", "P808"})


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
    _prepare_jax(args.topology)
    try:
        from planc.targets.aot.pipeline import placement

        # The topology and the mesh on it first: seconds, and before the step's module runs.
        placement(plan.ir, args.topology)
        step, trees, abstractly = _load_step(args.step, plan.ir.file)
        if args.format == "html":
            too_many = _too_large_for_page(plan, trees[0], args.step)
            if too_many is not None:
                emit_diagnostics(found + [too_many], sources, args, stream=sys.stderr,
                                 to_file=False)
                return EXIT_USAGE
        try:
            report = plan.aot(step, *trees, topology=args.topology, donate=not args.no_donate)
        except PlanError as exc:
            if not (abstractly and _leaked(exc)):
                raise
            # The step reads values its builder made: build them for real and retry.
            step, trees, _ = _load_step(args.step, plan.ir.file, plainly=True)
            report = plan.aot(step, *trees, topology=args.topology, donate=not args.no_donate)
    except PlanError as exc:
        diags = found + list(exc.diagnostics)
        as_json = args.format == "json"  # the JSON document, to stdout or -o
        emit_diagnostics(diags, {**sources, **exc.sources}, args,
                         stream=sys.stdout if as_json else sys.stderr, to_file=as_json)
        return EXIT_USAGE if any(d.code in _USAGE_CODES for d in diags) else EXIT_PLAN
    diags = found + list(report.diagnostics)
    from planc.reports.aot import render_text

    if args.format == "html":
        write_output(_page(plan, report, diags, trees[0]), args.output)
        if diags:
            emit_diagnostics(diags, {**sources, **report.sources}, args, stream=sys.stderr,
                             to_file=False)
    elif args.format == "json":
        import json

        from planc.diagnostics import severity_counts
        from planc.diagnostics.formats import diagnostic_dict

        doc = report.to_dict()
        doc["diagnostics"] = [diagnostic_dict(d) for d in sorted(diags, key=Diagnostic.sort_key)]
        doc["summary"] = severity_counts(diags)
        write_output(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", args.output)
    else:
        write_output(render_text(report), args.output)
        if diags:
            emit_diagnostics(diags, {**sources, **report.sources}, args, stream=sys.stderr,
                             to_file=False)
    return exit_code(diags)


def _params_variables(plan, params):
    """The step's parameters as `planc.Variable`s, named as `plan.aot` lays them out."""
    import numpy as np

    from planc.targets.aot.arguments import abstract
    from planc.targets.jax.sharding import tree_paths
    from planc.variables import Variable

    paths, _ = tree_paths(abstract(plan.ir, "params", params))
    return tuple(Variable(p, tuple(int(d) for d in leaf.shape), np.dtype(leaf.dtype).name)
                 for p, leaf in paths)


def _too_large_for_page(plan, params, spec: str):
    """P532 when the parameters are more than the page holds; None otherwise."""
    import jax

    from planc.reports.html import MAX_PAGE_VARIABLES, too_many_variables

    count = len(jax.tree_util.tree_leaves(params))
    return too_many_variables(count, spec) if count > MAX_PAGE_VARIABLES else None


def _page(plan, report, diags, params) -> str:
    """The HTML page of `report`, with the parameters' table as `planc explain` has it."""
    from planc.diagnostics import severity_counts
    from planc.diagnostics.formats import diagnostic_dict
    from planc.reports.explain import document
    from planc.reports.html import aot_page
    from planc.resolve import validate

    doc = report.to_dict()
    doc["diagnostics"] = [diagnostic_dict(d) for d in sorted(diags, key=Diagnostic.sort_key)]
    doc["summary"] = severity_counts(diags)
    layouts = validate(plan.ir, _params_variables(plan, params), report.devices)
    explain = document(plan, layouts, list(layouts.diagnostics), layouts.variable_dicts())
    return aot_page(doc, explain=explain, slices={a.name: a.slices for a in plan.ir.mesh.axes})


def _prepare_jax(topology: str) -> None:
    """Before jax loads: the CPU platform unless one is chosen, and `cpu:N`'s devices."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("KERAS_BACKEND", "jax")  # a step module may import Keras
    m = re.fullmatch(r"\s*cpu:(\d{1,7})\s*", topology)
    if m is None or "jax" in sys.modules:
        return
    want = int(m.group(1))
    flags = os.environ.get("XLA_FLAGS", "")
    have = re.search(r"--xla_force_host_platform_device_count=(\d+)", flags)
    if have is None:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={want}".strip()
    elif int(have.group(1)) < want:
        os.environ["XLA_FLAGS"] = flags.replace(
            have.group(0), f"--xla_force_host_platform_device_count={want}")


def _leaked(exc: PlanError) -> bool:
    return any(d.code == "P805" and "Tracer" in d.message for d in exc.diagnostics)


def _load_step(spec: str, plan_file: str, plainly: bool = False):
    """(step, (params, opt_state, batch), whether built abstractly) from `MODULE:ATTR`."""
    from planc.sources import SourceError
    from planc.sources.objects import cwd_on_path, import_attr

    try:
        builder = import_attr(spec)
    except SourceError as exc:
        raise UsageError(f"--step {exc}") from None
    with cwd_on_path():  # a builder may import its siblings when called
        return _built(spec, plan_file, builder, plainly)


def _built(spec: str, plan_file: str, builder, plainly: bool):
    if not callable(builder):
        _convention(plan_file, f"`{spec}` is a {type(builder).__name__}, not a function")
    import jax

    if not plainly:
        captured: dict = {}

        def traced():
            captured["result"] = _split(spec, plan_file, builder(), abstract=True)

        try:
            jax.eval_shape(traced)
            return (*captured["result"], True)
        except PlanError:
            raise
        except (Exception, SystemExit):
            pass  # some builders need concrete values: built plainly below
    try:
        result = builder()
    except (Exception, SystemExit) as exc:
        raise UsageError(f"--step {spec}: calling it raised {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    return (*_split(spec, plan_file, result, abstract=False), False)


def _split(spec: str, plan_file: str, result, abstract: bool):
    if not isinstance(result, (tuple, list)) or len(result) != 4:
        what = (f"a {type(result).__name__} of {len(result)}"
                if isinstance(result, (tuple, list)) else f"a {type(result).__name__}")
        _convention(plan_file, f"`{spec}()` returns {what}, not `(step, params, opt_state, "
                               "batch)`")
    step, *trees = result
    if not callable(step):
        _convention(plan_file, f"the first of what `{spec}()` returns is a "
                               f"{type(step).__name__}, not the step function")
    if abstract:
        import jax

        def shape_of(x):
            if hasattr(x, "shape") and hasattr(x, "dtype"):
                return jax.ShapeDtypeStruct(tuple(x.shape), x.dtype)
            return x
        trees = [jax.tree_util.tree_map(shape_of, t) for t in trees]
    return step, tuple(trees)


def _convention(plan_file: str, message: str):
    raise PlanError((error("P806", message, None, file=plan_file,
                           help="MODULE:ATTR is a function of no arguments that returns "
                                "(step, params, opt_state, batch), step(params, opt_state, "
                                "batch) returning (params, opt_state, ...)"),))

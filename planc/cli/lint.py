"""`planc lint PLAN... [--model SRC] [--checkpoint CKPT] [--devices N,...] [--golden FILE]`:
the plans' checks, in CI or by hand.

Each plan is validated against `--model`, else the model it names (`model "PATH"`, or
its `[tool.planc]` entry in pyproject.toml). An input that cannot be read (a plan, a
model, a golden, a checkpoint) exits 2, and the report (`-o`) is still written, saying
so. On success one summary line goes to stderr unless `--quiet`.
"""

from __future__ import annotations

import os
import sys

from planc.cli.common import (EXIT_USAGE, UsageError, emit_diagnostics, exit_code, load_model,
                              parse_defines, parse_devices, say)


def run(args) -> int:
    """Run `planc lint` for parsed `args`; returns the exit code."""
    from planc.reports.lint import LintResult, failure, lint_plans

    defines = parse_defines(args.defines)
    counts = parse_devices(args.devices)
    _check_base_dir(args)
    plans = sorted(set(args.plans))
    failures = []
    golden = None
    if args.golden is not None:
        golden, counts = _golden(args, plans, counts, failures)
    variables = None
    if args.model:
        try:
            variables = load_model(args.model)
        except UsageError as exc:
            failures.append(failure(str(exc), args.model))
    if failures:
        result = LintResult()
    else:
        result = lint_plans(
            plans, defines, counts, variables,
            allow_include_outside=args.allow_include_outside,
            progress=args.format == "text" and sys.stderr.isatty(),
            checkpoint=args.checkpoint, strict=args.strict, golden=golden,
            load_model=_model_loader())
        if variables is not None:
            result.models.add(args.model)
        if golden is not None and result.plans and not result.validated:
            raise UsageError(f"--golden needs the plan's model: pass --model SRC, or add "
                             f"`model \"PATH\"` to {plans[0]}")
    failures += result.failures
    diags = result.diagnostics
    emit_diagnostics(diags, result.sources, args, failures=failures, files=plans)
    for f in failures:
        say(f.message)
    code = EXIT_USAGE if failures else exit_code(diags, args.strict)
    if code == 0 and not args.quiet:
        say(_summary(result, diags))
    return code


def _model_loader():
    """`load_model` for the models plans name, each read once however many plans share it."""
    from planc.sources import SourceError, load_variables

    cache: dict = {}

    def load(source: str):
        if source not in cache:
            try:
                cache[source] = load_variables(source)
            except SourceError as exc:
                cache[source] = exc
        found = cache[source]
        if isinstance(found, Exception):
            raise found
        return found

    os.environ.setdefault("KERAS_BACKEND", "jax")
    return load


def _golden(args, plans, counts, failures):
    from planc.reports.diff import GoldenError, read_document

    if len(plans) != 1:
        raise UsageError(f"--golden compares one plan with its golden table, got {len(plans)} "
                         "plans")
    try:
        doc = read_document(args.golden)
        if doc["devices"] is None:
            # Its shard shapes are unknown: nothing of the layout could be compared.
            raise GoldenError(f"{args.golden} was written without a device count (an "
                              f"`auto` axis and no --devices); a golden is one device "
                              f"count's table", args.golden)
    except GoldenError as exc:
        failures.append(exc.diagnostic())
        return None, counts
    written = doc.get("devices")
    if not counts:
        return doc, [written] if isinstance(written, int) else []
    if written not in counts:
        raise UsageError(f"the golden {args.golden} was written for "
                         f"{written if written is not None else 'no'} devices; "
                         f"--devices {args.devices} does not include that count")
    return doc, [written]


def _check_base_dir(args) -> None:
    base = getattr(args, "base_dir", None)
    if base is None:
        args.base_dir = repository_root(os.getcwd())
    elif not os.path.isdir(base):
        raise UsageError(f"--base-dir {base}: not a directory")


def repository_root(start: str) -> str:
    """The git repository `start` is in (its top directory), else `start`."""
    here = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return os.path.abspath(start)
        here = parent


def _summary(result, diags) -> str:
    plans = f"{result.plans} plan{'s' if result.plans != 1 else ''}"
    models = sorted(result.models)
    named = f"`{models[0]}`" if len(models) == 1 else f"{len(models)} models"
    if result.validated == result.plans and result.plans:
        against = f" against {named} ({result.variables} variables)"
    elif result.validated:
        against = (f", {result.validated} of them against {named} "
                   f"({result.variables} variables)")
    else:
        against = ", none against a model (give --model, or `model \"PATH\"` in the plan)"
    counts = sorted(result.counts)
    at = (f"at {', '.join(map(str, counts))} devices" if counts
          else "without a device count (--devices N,...)")
    found = [f"{n} {k[:-1] if n == 1 else k}" for k, n in _counts(diags).items() if n]
    return f"checked {plans}{against}, {at}: " + (", ".join(found) or "no problems")


def _counts(diags) -> dict:
    from planc.diagnostics import severity_counts

    return severity_counts(diags)

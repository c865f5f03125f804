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

from planc.diagnostics import PlanError
from planc.cli.common import (EXIT_USAGE, UsageError, emit_diagnostics, exit_code,
                              parse_defines, parse_devices, read_model, say)


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
    model = None
    # With a checkpoint, a Keras model also names the datasets of its `.weights.h5`, so
    # the file is paired with it as `plan.load` pairs it.
    names = args.checkpoint is not None
    if names:  # an Orbax checkpoint's metadata is read through jax: described, never run
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    found = []
    if args.model:
        try:
            model = read_model(args.model, weights_names=names)
        except UsageError as exc:
            failures.append(failure(str(exc), args.model))
        except PlanError as exc:  # read, and refused with its code
            found = list(exc.diagnostics)
    elif names:
        model, found = _preset_model(args.checkpoint, failures)
    topology = (_topology_check(args.topology, failures) if args.topology is not None
                else None)
    if failures:
        result = LintResult()
    else:
        result = lint_plans(
            plans, defines, counts, model,
            allow_include_outside=args.allow_include_outside,
            progress=args.format == "text" and sys.stderr.isatty(),
            checkpoint=args.checkpoint, strict=args.strict, golden=golden,
            load_model=_model_loader(names), topology=topology)
        if model is not None:
            result.models.add(args.model or args.checkpoint)
        if golden is not None and result.plans and not result.validated:
            raise UsageError(f"--golden needs the plan's model: pass --model SRC, or add "
                             f"`model \"PATH\"` to {plans[0]}")
    failures += result.failures
    # a preset given as both --model and --checkpoint is refused once, not twice
    seen = {(d.code, d.message) for d in result.diagnostics}
    diags = [d for d in found if (d.code, d.message) not in seen] + result.diagnostics
    emit_diagnostics(diags, result.sources, args, failures=failures, files=plans)
    coded = [f for f in failures if f.code != "P325"]  # an input read, and refused (P801)
    if coded and args.format == "text":
        emit_diagnostics(coded, {}, args, stream=sys.stderr, to_file=False)
    for f in failures:  # a machine format's reader still hears why on stderr
        if f.code == "P325" or args.format != "text":
            say(f.message)
    code = EXIT_USAGE if failures else exit_code(diags, args.strict)
    if code == 0 and not args.quiet:
        say(_summary(result, diags))
    return code


def _preset_model(path: str, failures: list):
    """(the model a keras-hub preset's ``config.json`` describes, built with no variable
    allocated, or None; diagnostics) for `--checkpoint PRESET` without `--model`: the
    preset's weights are checked against the model they were saved from."""
    from planc.diagnostics import error
    from planc.reports.lint import failure
    from planc.sources import SourceError, load_model
    from planc.sources.preset import PresetError, is_preset

    if not is_preset(path):
        return None, []
    os.environ.setdefault("KERAS_BACKEND", "jax")
    try:
        return load_model(path, weights_names=True), []
    except PresetError as exc:
        # A preset without weights (P421), or whose weights a link leads out of it
        # (P411), is found again as its checkpoint is opened.
        return None, [] if exc.code in ("P411", "P421") else [error(exc.code, str(exc), None,
                                                                    file=path)]
    except SourceError as exc:
        failures.append(failure(str(exc), path))
        return None, []


def _topology_check(name: str, failures: list):
    """`check(ir) -> (device count, problems)` of the plan's mesh on topology `name`,
    found without compiling (`planc.targets.aot.feasibility`), and of its device budgets
    against the chip's memory (`planc.targets.cost.chip_budget`). jax loads only here, on
    the CPU platform unless one is chosen: the topology is described, never run on. A
    topology that cannot be loaded (an empty, malformed or too large name) is P801 or
    P802, as for `planc aot`, and exits 2."""
    from planc.cli.common import prepare_jax

    prepare_jax(name)
    from planc.targets.aot.feasibility import lint_topology, slice_count
    from planc.targets.aot.topology import TopologyError, load_topology
    from planc.targets.cost.chip_budget import budget_past_chip

    def check(ir):
        try:
            count, problems = lint_topology(ir, name)
            # the topology lint_topology loaded: `load_topology` keeps it
            return count, problems + budget_past_chip(ir, load_topology(name, slice_count(ir)))
        except TopologyError as exc:
            d = exc.diagnostic
            if not any(f.message == d.message for f in failures):
                failures.append(d if d.span or d.file else d._replace(file=ir.file))
            return None, []

    return check


def _model_loader(weights_names: bool):
    """`load_model` for the models plans name, each read once however many plans share it."""
    from planc.sources import SourceError, load_model

    cache: dict = {}

    def load(source: str):
        if source not in cache:
            try:
                cache[source] = load_model(source, weights_names=weights_names)
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
    at = (f"at {', '.join(map(str, counts))} device{'' if counts == [1] else 's'}" if counts
          else "without a device count (--devices N,...)")
    found = [f"{n} {k[:-1] if n == 1 else k}" for k, n in _counts(diags).items() if n]
    return f"checked {plans}{against}, {at}: " + (", ".join(found) or "no problems")


def _counts(diags) -> dict:
    from planc.diagnostics import severity_counts

    return severity_counts(diags)

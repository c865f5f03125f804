"""`planc compile`: a plan as a file people run.

    planc compile PLAN [-D NAME=VALUE ...] [--model SRC] [--devices N]
                  [--target jax|keras|torch|hf|flax|maxtext|megatron|torchtitan|json]
                  [-o FILE]

- `--target jax` (default) writes a Python module that needs only `jax`, `numpy` and
  `re` (`planc.targets.emit.jax_module`).
- `--target keras` writes a module that needs only `keras` (`planc.targets.emit.keras_module`).
- `--target torch` writes a module that needs only torch: the plan as DTensor
  placements (`planc.targets.emit.torch_module`).
- `--target hf` writes the plan as a Hugging Face tensor-parallel plan, JSON
  (`planc.targets.emit.hf_plan`).
- `--target flax` writes the `axes` table as Flax logical axis rules, a Python module
  with no imports (`planc.targets.emit.flax_rules`); `--target maxtext` as MaxText config
  settings, YAML (`planc.targets.emit.maxtext_config`).
- `--target megatron` writes the plan's `stages` as Megatron-LM's
  `pipeline_model_parallel_layout` (`planc.targets.emit.megatron_layout`),
  `--target torchtitan` as torchtitan's `[parallelism]` settings
  (`planc.targets.emit.torchtitan_parts`).
- `--target json` writes the resolved plan as JSON, schema `planc.compiled/1`
  (`planc.targets.emit.compiled_json`).

With `--model`, the plan is resolved against the model's variables first: any error
(an unmatched matrix, an ambiguous match, a rank or divisibility misfit) refuses the
output (exit 1, diagnostics on stderr, nothing written); otherwise the resolved table
is embedded. `--devices N` binds `auto` for N devices before anything else, so the
table's divisibility checks cover every axis.

The output depends only on the plan and the model: it is byte-identical across runs
and `PYTHONHASHSEED` values. `-o FILE` is written atomically (`planc.fileio.atomic_write`):
on any error no file is created and an existing one is left as it was. Without `-o`
the output goes to stdout; diagnostics always go to stderr.
"""

from __future__ import annotations

import sys

from planc.cli.common import (EXIT_OK, EXIT_PLAN, UsageError, emit_diagnostics, load,
                              load_variables, parse_defines, parse_devices, write_output)
from planc.diagnostics import Diagnostic, PlanError, Severity, error
from planc.ir import PlanIR


def run(args) -> int:
    """The `planc compile` command; returns the exit code (0, 1 plan errors, 2 usage)."""

    emitted: list = []  # the target's own notes (P143), shown where other notes are not

    def report(diags, sources) -> None:
        shown = [d for d in diags if d.severity is not Severity.NOTE] + emitted
        if shown:
            # Never to -o FILE: that is where the compiled output belongs.
            emit_diagnostics(shown, sources, args, stream=sys.stderr, to_file=False)

    defines = parse_defines(args.defines)
    counts = parse_devices(getattr(args, "devices", None))
    if len(counts) > 1:
        raise UsageError(f"compile takes one device count, not `{args.devices}`")
    plan, diags, sources = load(args.plan, defines, getattr(args, "allow_include_outside", False))
    if plan is None:
        report(diags, sources)
        return EXIT_PLAN
    try:
        if counts:
            plan = plan.with_devices(counts[0])
        ir = plan.ir
        resolution = None
        if args.model:
            from planc.resolve import Resolver

            resolution = Resolver(ir).resolve_all(load_variables(args.model))
            found = list(resolution.diagnostics)
            diags = diags + found
            errors = sum(1 for d in found if d.is_error)
            if errors:
                report(diags + [_refusal(ir, errors, args.model)], sources)
                return EXIT_PLAN
        text = _render(args.target, ir, resolution, args.output, emitted)
    except PlanError as exc:
        report(list(exc.diagnostics), exc.sources or sources)
        return EXIT_PLAN
    report(diags, sources)
    write_output(text, args.output)
    return EXIT_OK


def _refusal(ir: PlanIR, errors: int, model: str) -> Diagnostic:
    span = ir.layout_span or ir.mesh.span
    return error("P313", f"not compiled: the plan has {errors} error"
                 f"{'s' if errors != 1 else ''} against the model `{model}`", span,
                 label="plan", help="fix the errors above; `planc explain` shows the "
                                    "layout of every variable")


def _render(target: str, ir: PlanIR, resolution, output: str | None,
            notes: list | None = None) -> str:
    """The text `target` writes for `ir` (and the model resolved against it) to `output`
    (None: stdout), whose name the module's docstring imports; the target's notes are
    appended to `notes`."""
    if target == "json":
        from planc.targets.emit.compiled_json import compiled_json

        return compiled_json(ir, resolution)
    if target == "hf":
        from planc.targets.emit.hf_plan import hf_plan_text

        return hf_plan_text(ir, resolution)
    if target == "flax":
        from planc.targets.emit.flax_rules import module_text

        return module_text(ir, resolution, notes)
    if target == "maxtext":
        from planc.targets.emit.maxtext_config import config_text

        return config_text(ir, resolution, notes)
    if target == "torchtitan":
        from planc.targets.emit.torchtitan_parts import toml_text

        return toml_text(ir, [a.variable for a in resolution.assignments]
                         if resolution is not None else None)
    if target == "megatron":
        from planc.targets.emit.megatron_layout import megatron_text

        return megatron_text(ir, [a.variable for a in resolution.assignments]
                             if resolution is not None else None)
    from planc.targets.emit.codegen import import_name

    if target == "keras":
        try:
            from planc.targets.emit.keras_module import module_text
        except ImportError as exc:
            raise UsageError(f"keras target not available: {exc}") from None
        return module_text(ir, resolution, module=import_name(output, "plan_keras"))
    if target == "torch":
        from planc.targets.emit.torch_module import module_text

        return module_text(ir, resolution, module=import_name(output, "plan_torch"))
    from planc.targets.emit.jax_module import module_text

    return module_text(ir, resolution, module=import_name(output, "plan_sharding"))


"""Writes a plan's mesh and `axes` table as MaxText config settings (`--target maxtext`):
YAML to merge into a MaxText config, deterministic byte for byte.

- `mesh_axes`, and `ici_<axis>_parallelism` for each axis (`stage`: MaxText's
  `ici_pipeline_parallelism`); `auto` is -1. An axis over several slices has its
  `dcn_<axis>_parallelism`.
- `logical_axis_rules`, in the table's order: one axis as a string, several as a list,
  none as `[]`; led by `activation_batch`, the plan's batch axes, where the table has
  no such rule (MaxText reads the batch from it alone, and one that says another batch
  is P311).

- With `stages` over MaxText's pipeline axis `stage`: `num_pipeline_microbatches`,
  `num_pipeline_repeats` (the V of `interleaved(V)` or `looped_bfs(V)`, else 1; MaxText's
  circular pipeline runs as `looped_bfs(V)`, which `planc import` reads back) and
  `num_layers_per_pipeline_stage` (the layers over the stages: from `param layers`, or
  the leading dimension of the model's layers stacked over `stage`, `--model`).

`planc import` of the output gives the same mesh and table back.
"""

from __future__ import annotations

from planc.diagnostics import PlanError, error
from planc.fingerprint import fingerprint
from planc.ir import PlanIR
from planc.targets.emit.codegen import docstring_name
from planc.targets.emit.logical_table import logical_rules

__all__ = ["config_text"]


def config_text(ir: PlanIR, resolution=None, notes: list | None = None) -> str:
    """The YAML text, or `PlanError` (P311) where the plan says what the rules cannot;
    path rules the model shows only restate its names are left out (P143, in `notes`)."""
    pipeline = _pipeline_lines(ir, resolution)
    rules = _with_batch(ir, logical_rules(ir, resolution, "maxtext", notes))
    lines = [f"# plan {docstring_name(ir.name)}, fingerprint {fingerprint(ir)}",
             "# written by `planc compile --target maxtext`",
             "mesh_axes: [" + ", ".join(_q(n) for n in ir.mesh.names) + "]"]
    for axis in ir.mesh.axes:
        key = "pipeline" if axis.name == "stage" else axis.name
        lines.append(f"ici_{key}_parallelism: {-1 if axis.size is None else axis.size}")
        if axis.slices > 1:
            lines.append(f"dcn_{key}_parallelism: {axis.slices}")
    lines += pipeline
    lines.append("logical_axis_rules: [")
    for name, axes in rules:
        target = _q(axes[0]) if len(axes) == 1 else "[" + ", ".join(map(_q, axes)) + "]"
        lines.append(f"  [{_q(name)}, {target}],")
    lines.append("]")
    return "\n".join(lines) + "\n"


def _with_batch(ir: PlanIR, rules: tuple) -> tuple:
    """The rules with the plan's batch as MaxText says it, an `activation_batch` rule
    first where the table has none; P311 where the table's rule says another batch."""
    batch = tuple(ir.batch_axes)
    written = next((axes for name, axes in rules if name == "activation_batch"), None)
    if written is None:
        return (("activation_batch", batch),) + tuple(rules)
    if tuple(written) != batch:
        entry = next(e for e in ir.logical_axes if e.name == "activation_batch")
        raise PlanError((error(
            "P311", f"the batch is over {_axes_text(batch)}, and the table's "
            f"`activation_batch` over {_axes_text(written)}: MaxText splits the batch by "
            "that rule alone", entry.span or ir.anchor, label="this rule",
            help="make `activation_batch` the axes of `model_parallel(batch = ...)`"),),
            ir.source_dict)
    return rules


def _axes_text(axes) -> str:
    return "`" + ", ".join(axes) + "`" if axes else "no axis"


def _pipeline_lines(ir: PlanIR, resolution) -> list[str]:
    stages = ir.stages
    if stages is None:
        return []
    if stages.axis != "stage":
        raise PlanError((error("P311", f"MaxText pipelines over its mesh axis `stage`, and "
                               f"these stages are over `{stages.axis}`", stages.span,
                               label="this axis", help="name the pipeline axis `stage`"),),
                        ir.source_dict)
    if stages.rules:
        raise PlanError((error("P311", "MaxText stacks its layers and splits them over "
                               "`stage`: stage rules have no form in its config",
                               stages.span, label="these rules",
                               help="lay the stacked layers out as `(stage, ...)` and leave "
                                    "the `stages` block without rules"),), ir.source_dict)
    layers = ir.param_dict.get("layers")
    if not isinstance(layers, int) or isinstance(layers, bool):
        layers = None
        for a in (resolution.assignments if resolution is not None else ()):
            first = a.layout.axes[0] if a.layout.axes else None
            if first == "stage" or (isinstance(first, tuple) and "stage" in first):
                layers = a.variable.shape[0]
                break
    count = stages.count(ir.mesh)
    if layers is None or count is None or layers % count:
        raise PlanError((error("P311", "MaxText needs the layers per stage: give "
                               "`param layers = N` (a multiple of the stages) or the model "
                               "(`--model`) whose layers are stacked over `stage`",
                               stages.span, label="these stages"),), ir.source_dict)
    return [f"num_pipeline_microbatches: {stages.microbatches}",
            f"num_pipeline_repeats: {stages.virtual}",
            f"num_layers_per_pipeline_stage: {layers // count}"]


def _q(name: str) -> str:
    # Names are identifiers (the grammar's), so single quotes hold them as they are.
    return f"'{name}'"

"""Writes a plan's stages as torchtitan's pipeline settings (`--target torchtitan`): the
`[parallelism]` table of its TOML job config.

    [parallelism]
    pipeline_parallel_degree = 4
    pipeline_parallel_schedule = "1F1B"
    module_fqns_per_model_part = [["tok_embeddings", "layers.0", "layers.1"], ...]

A model part is a stage, in stage order; its modules are the top-level modules of its
variables (`tok_embeddings`, `norm`, `output`) and each numbered layer (`layers.3`), as
torchtitan splits a model by module names. The schedule is torch's class name without
`Schedule` (`GPipe`, `1F1B`, `Interleaved1F1B`), and the microbatch count, which
torchtitan derives from its local batch size and `pipeline_parallel_microbatch_size`,
is written as a comment to check them against. It needs the model (`--model`): the
module names are the model's.
"""

from __future__ import annotations

import json

from planc.diagnostics import PlanError, error
from planc.diagnostics.text import counted
from planc.resolve.stages import module_parts

def toml_text(ir, variables) -> str:
    """The `[parallelism]` table, or `PlanError` (P311) without stages or a model."""
    if ir.stages is None:
        raise PlanError((error("P311", "the torchtitan target writes the plan's `stages`, and "
                               "this plan has none", ir.anchor),), ir.source_dict)
    if variables is None:
        raise PlanError((error("P311", "the torchtitan target needs the model (`--model`): "
                               "its module names make the parts", ir.stages.span,
                               label="these stages"),), ir.source_dict)
    from planc.resolve import validate

    parts = module_parts(validate(ir, variables))
    stages = ir.stages
    lines = [f"# plan {ir.name}: {counted(len(parts), 'stage')} over `{stages.axis}`, "
             f"{stages.microbatches} microbatches (torchtitan: local batch size / "
             "pipeline_parallel_microbatch_size)",
             "[parallelism]",
             f"pipeline_parallel_degree = {ir.mesh.size_of(stages.axis)}",
             f"pipeline_parallel_schedule = \"{stages.torch_schedule}\"",
             "module_fqns_per_model_part = ["]
    lines += [f"    {json.dumps(part)}," for part in parts]
    lines.append("]")
    return "\n".join(lines) + "\n"

"""Writes a plan's mesh and `axes` table as MaxText config settings (`--target maxtext`):
YAML to merge into a MaxText config, deterministic byte for byte.

- `mesh_axes`, and `ici_<axis>_parallelism` for each axis (`stage`: MaxText's
  `ici_pipeline_parallelism`); `auto` is -1. An axis over several slices has its
  `dcn_<axis>_parallelism`.
- `logical_axis_rules`, in the table's order: one axis as a string, several as a list,
  none as `[]`.

`planc import` of the output gives the same plan back.
"""

from __future__ import annotations

from planc.fingerprint import fingerprint
from planc.ir import PlanIR
from planc.targets.emit.codegen import docstring_name
from planc.targets.emit.logical_table import logical_rules

__all__ = ["config_text"]


def config_text(ir: PlanIR, resolution=None) -> str:
    """The YAML text, or `PlanError` (P311) where the plan says what the rules cannot."""
    rules = logical_rules(ir, resolution, "maxtext")
    lines = [f"# plan {docstring_name(ir.name)}, fingerprint {fingerprint(ir)}",
             "# written by `planc compile --target maxtext`",
             "mesh_axes: [" + ", ".join(_q(n) for n in ir.mesh.names) + "]"]
    for axis in ir.mesh.axes:
        key = "pipeline" if axis.name == "stage" else axis.name
        lines.append(f"ici_{key}_parallelism: {-1 if axis.size is None else axis.size}")
        if axis.slices > 1:
            lines.append(f"dcn_{key}_parallelism: {axis.slices}")
    lines.append("logical_axis_rules: [")
    for name, axes in rules:
        target = _q(axes[0]) if len(axes) == 1 else "[" + ", ".join(map(_q, axes)) + "]"
        lines.append(f"  [{_q(name)}, {target}],")
    lines.append("]")
    return "\n".join(lines) + "\n"


def _q(name: str) -> str:
    # Names are identifiers (the grammar's), so single quotes hold them as they are.
    return f"'{name}'"

"""Writes a plan's `axes` table as Flax logical axis rules (`--target flax`): a Python
module with no imports, deterministic byte for byte.

    LOGICAL_AXIS_RULES = (("embed", "fsdp"), ("batch", ("data", "fsdp")), ("kv", None))

is what `flax.linen.logical_axis_rules`, `nn.logical_to_mesh_axes` and
`nn.logical_to_mesh_sharding` take: one mesh axis as a string, several as a tuple, none
as None; the order and the fallbacks are the table's.
"""

from __future__ import annotations

from planc.fingerprint import fingerprint
from planc.ir import PlanIR
from planc.targets.emit.codegen import docstring_name, literal
from planc.targets.emit.logical_table import logical_rules

__all__ = ["module_text"]


def module_text(ir: PlanIR, resolution=None, notes: list | None = None) -> str:
    """The module's text, or `PlanError` (P311) where the plan says what the rules cannot;
    path rules the model shows only restate its names are left out (P143, in `notes`)."""
    rules = logical_rules(ir, resolution, "flax", notes)
    lines = [
        f'"""Flax logical axis rules of plan `{docstring_name(ir.name)}`, written by '
        "`planc compile --target flax`.",
        "",
        "    import flax.linen as nn",
        "    with nn.logical_axis_rules(LOGICAL_AXIS_RULES):",
        "        ...",
        "    nn.logical_to_mesh_axes((\"embed\", \"mlp\"), LOGICAL_AXIS_RULES)",
        "",
        "Entries apply in order: a dimension takes the first entry of its name whose mesh",
        "axes are still free in that array.",
        '"""',
        "",
        f"FINGERPRINT = {literal(fingerprint(ir))}",
        f"MESH_AXES = {literal(ir.mesh.names)}",
        "# Global axis sizes; None: `auto`, the devices left.",
        f"MESH_SHAPE = {literal(ir.mesh.shape)}",
        "LOGICAL_AXIS_RULES = (",
    ]
    for name, axes in rules:
        target = None if not axes else axes[0] if len(axes) == 1 else axes
        lines.append(f"    ({literal(name)}, {literal(target)}),")
    lines.append(")")
    return "\n".join(lines) + "\n"

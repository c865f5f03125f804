"""What the `flax` and `maxtext` targets share: the plan's `axes` table as rules, and the
refusal of what those rules cannot say.

Flax's and MaxText's rules map logical names to mesh axes and nothing else: a plan's path
rules, `state` and `outputs` rules have no form there. Writing the table without them
would drop them silently, so each is refused at its rule (P311); `default -> replicated`
is what those rules already do for a variable without names, and is kept.
"""

from __future__ import annotations

from planc.diagnostics import PlanError, error
from planc.ir import PlanIR
from planc.targets.emit.codegen import refuse_errors


def logical_rules(ir: PlanIR, resolution, target: str) -> tuple:
    """`((name, axes), ...)` of the table, in order; `PlanError` where the plan says more
    than the table (or, with `resolution`, has errors against the model)."""
    refuse_errors(ir, resolution)
    problems = []
    if not ir.logical_axes:
        problems.append(error("P311", f"the {target} target writes the plan's `axes` table, "
                              "and this plan has none", ir.anchor,
                              help="add `axes { NAME -> AXES ... }`; path rules have no "
                                   f"form in {target}'s logical axis rules"))
    extra = [*ir.rules, *ir.state, *ir.outputs,
             *(r for r in (ir.state_default, ir.outputs_default) if r is not None)]
    if ir.default is not None and not all(a.replicated for a in ir.default.layout.alternatives):
        extra.append(ir.default)
    for rule in extra:
        problems.append(error("P311", f"{target}'s logical axis rules cannot say the rule "
                              f"{rule.label} -> {rule.layout.text}: they map names to mesh "
                              "axes, never paths", rule.span, label="no form in the rules",
                              help="name the variable's dimensions in the model and map the "
                                   "names in `axes`, or keep this plan for planc's own "
                                   "targets (jax, keras, torch)"))
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)
    return tuple((e.name, e.axes) for e in ir.logical_axes)

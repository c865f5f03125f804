"""A plan's layouts as DTensor placements, and what has no placement list (P311).

A DTensor is laid out by one placement per mesh dimension: `Shard(d)` (tensor dimension
`d` split over that mesh dimension) or `Replicate()`. A plan's resolved layout has one
entry per tensor dimension instead, so the translation turns it around: mesh
dimension `i` is `Shard(d)` when dimension `d` of the tensor names axis `i`, else
`Replicate()`. JAX's `P(("a", "b"))` on a mesh `(a, b)` is `[Shard(0), Shard(0)]`:
DTensor splits a dimension sharded over several mesh dimensions in mesh order, major to
minor, as JAX does with the tuple; rank r holds the slice JAX gives the device at mesh
coordinate `unravel(r)`, the row-major order `init_device_mesh` numbers ranks in.

What DTensor cannot take is refused (P311, at the rule), never approximated:

- a dimension over axes in another order than the mesh's (`(b, a)` on `mesh(a, b)`):
  DTensor would split it `a`-major, so every shard would hold other rows than JAX's;
  only a private strided placement or a transposed mesh expresses it;
- `outputs` rules: the torch target lays out parameters only;
- a layout `on host` (a placement list has no memory kind) and a `state` rule (the
  optimizer's state follows its DTensor parameter: the target places parameters only),
  which would otherwise be dropped without a word; the hf target refuses them alike.

Blocks (`model[128]`) are divisibility checks the resolver made: `Shard(d)` splits the
dimension into equal parts, which are then whole blocks. The mesh's slices and axis
types do not change which slice a rank holds. This module imports no torch: `planc
compile --target torch` calls it, and `_mesh_dims` below is copied into the module that
writes (see `planc.targets.emit.codegen`).
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, PlanError, error
from planc.ir import PlanIR, Rule

__all__ = ["refuse_inexpressible", "torch_problems", "outputs_rule", "memory_and_state"]

_ORDER_HELP = ("reorder the tuple to the mesh's order ({fixed}), or the mesh so that "
               "{first} comes before {then}; the JAX target (`--target jax`) takes the plan "
               "as it is")


def torch_problems(ir: PlanIR) -> list[Diagnostic]:
    """The P311s of `ir` for the torch target, in file order."""
    problems = [_axis_order(rule, dim, ir.mesh.names)
                for rule in (*ir.rules, *((ir.default,) if ir.default else ()))
                for alt in rule.layout.alternatives for dim in alt.head + alt.tail
                if _out_of_order(dim.axes, ir.mesh.names)]
    problems += [outputs_rule(rule) for rule in
                 (*ir.outputs, *((ir.outputs_default,) if ir.outputs_default else ()))]
    return problems + memory_and_state(ir)


def refuse_inexpressible(ir: PlanIR) -> None:
    """Raise `PlanError` with every P311 of `ir` for the torch target."""
    problems = torch_problems(ir)
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)


def _out_of_order(axes: tuple[str, ...], names: tuple[str, ...]) -> bool:
    positions = [names.index(a) for a in axes]
    return positions != sorted(positions)


def _axis_order(rule: Rule, dim, names: tuple[str, ...]) -> Diagnostic:
    written = "(" + ", ".join(dim.axes) + ")"
    fixed = "(" + ", ".join(sorted(dim.axes, key=names.index)) + ")"
    first, then = next((x, y) for x, y in zip(dim.axes, dim.axes[1:])
                       if names.index(x) > names.index(y))
    mesh = "(" + ", ".join(names) + ")"
    return error("P311", f"rule {rule.label} splits a dimension over {written}, against the "
                 f"mesh's order {mesh}, which a DTensor placement list cannot express",
                 dim.span or rule.span, label="axes out of mesh order",
                 help=_ORDER_HELP.format(fixed=f"`{fixed}`", first=f"`{first}`",
                                         then=f"`{then}`"),
                 rule=rule.where)


def outputs_rule(rule: Rule, target: str = "torch") -> Diagnostic:
    """P311: `outputs` rule `rule` lays out activations, which the `target` target
    (torch, or hf) does not place."""
    return error("P311", f"`outputs` rule {rule.label} lays out activations, which the "
                 f"{target} target does not place: it lays out parameters only", rule.span,
                 label="an `outputs` rule", rule=rule.where,
                 help=f"drop the `outputs` block for the {target} target (keep it in a plan "
                      "for the JAX target), or place activations in the model's code "
                      "(`DTensor.redistribute`)")


def memory_and_state(ir: PlanIR, target: str = "torch") -> list[Diagnostic]:
    """P311 for each `layout` rule that places a layout `on host` and each `state` rule
    (on host or not): what the `target` target (torch, or hf) cannot place, which it would
    otherwise drop without a word. `outputs` rules are refused whole (`outputs_rule`)."""
    use_jax = ("use the JAX target (`plan.shardings`, `plan.init`, `planc compile --target "
               "jax`)")
    out = [error("P311", f"rule {rule.label} places its layout in pinned host memory (`on "
                 f"host`), which the {target} target cannot express: a DTensor placement "
                 "has no memory kind", rule.layout.host_span or rule.span,
                 label="memory kind", rule=rule.where,
                 help=f"{use_jax}, or drop `on host` for the {target} target")
           for rule in (*ir.rules, *((ir.default,) if ir.default else ())) if rule.layout.host]
    state = (*ir.state, *((ir.state_default,) if ir.state_default is not None else ()))
    out += [error("P311", f"rule {rule.label} lays out optimizer slots apart from their "
                  f"parameter, which the {target} target does not place: it lays out "
                  "parameters only, and an optimizer's state follows its DTensor parameter",
                  rule.span, label="state rule", rule=rule.where,
                  help=f"{use_jax} with optax for ZeRO-1 (`plan.shardings(opt_state, "
                       f"params=params)`), or remove the `state` block for the {target} "
                       "target")
            for rule in state]
    return out


# -- copied into emitted modules: placements ----------------------------------------------

def _mesh_dims(entries, axes):
    """For each mesh axis of `axes` in order, the tensor dimension split over it, or None.

    `entries` has one entry per tensor dimension: None, an axis, or a tuple of axes in
    mesh order (a DTensor splits a dimension over several mesh dimensions in mesh order).
    """
    out = [None] * len(axes)
    for dim, entry in enumerate(entries):
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        positions = [axes.index(name) for name in names]
        if positions != sorted(positions):
            raise ValueError(f"dimension {dim} is split over {names}, against the mesh's "
                             f"order {tuple(axes)}: no DTensor placement list holds it")
        for position in positions:
            out[position] = dim
    return out

"""Activation layouts for plain JAX: the plan's `outputs` rules as constraints and as
`jax.shard_map` specs, and the plan's mesh as JAX's current mesh.

`plan.use()`, `plan.constrain(x, name)`, `plan.activation_spec(name, rank)` and
`plan.shard_map(f, in_specs=..., out_specs=...)` call these. A name is matched against
the `outputs` rules as a layer path is (`decoder/block_0/attention`).

- `constrain` checks the value's shape against the rule before JAX sees it: a rank the
  rule does not take, or a dimension its axes do not divide, is a `PlanError` (P317)
  pointing at the rule's line, where JAX would pad silently under `auto` axes and fail
  only when the value is printed (jax-ml/jax#15788). No rule for the name: the value is
  returned unchanged, with a P318 note as a `ConstraintNote` warning.
- The primitive follows the axis types: see `planc.targets.jax.sharding.place`.
"""

from __future__ import annotations

import warnings

import jax
from jax.sharding import PartitionSpec

from planc.diagnostics import Diagnostic, PlanError, error, note
from planc.diagnostics.text import render_text
from planc.ir import PlanIR
from planc.resolve.resolution import Assignment, ResolvedLayout
from planc.targets.jax import sharding as target
from planc.targets.jax.compat import require
from planc.variables import Variable

__all__ = ["use", "constrain", "activation_spec", "shard_map", "ConstraintNote",
           "logical_constraint", "logical_spec"]


class ConstraintNote(UserWarning):
    """A note of `constrain` (P318: no `outputs` rule); `.diagnostics` holds it."""

    def __init__(self, text: str, diagnostics: tuple = ()):
        super().__init__(text)
        self.diagnostics = diagnostics


def use(ir: PlanIR, mesh=None, devices=None):
    """`jax.set_mesh` over the plan's mesh (built over `devices` unless `mesh` is given):
    the mesh is current from this call on, and, used as a context manager, until the
    `with` block ends. A device count that does not fit the mesh is P201."""
    set_mesh = require("set_mesh", ir, needed_for="`plan.use()`")
    if mesh is None:
        mesh = target.make_mesh(ir, devices)
    else:
        target._ir_for_mesh(ir, mesh)
    return set_mesh(mesh)


def _shape_of(x) -> tuple[int, ...]:
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"constrain takes an array or a traced value, not {type(x).__name__}")
    return tuple(int(d) for d in shape)


def _fitted(ir: PlanIR, name: str, shape, what: str):
    """(assignment, note or None) for activation `name` of `shape`; P317 when it cannot fit."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, not {type(name).__name__}")
    assignment, problems = target._resolver(ir, "outputs").resolve(Variable(name, shape))
    if assignment.rule is None:
        return None, note("P318", f"no `outputs` rule matches `{name}`: {what} is left as it is",
                          ir.outputs[0].span if ir.outputs else None,
                          help=f'add a rule to the `outputs` block, e.g. '
                          f'"{name}" -> ({ir.batch_axes[0]}, ...)')
    errors = [p for p in problems if p.is_error]
    if errors:
        rule = assignment.rule
        raise PlanError(tuple(error(
            "P317", f"{what} `{name}` of shape {list(shape)} does not fit its `outputs` rule "
            f"{rule.label} -> {rule.layout.text}: {p.message}", rule.span,
            label="the rule it must fit", help="reshape the value, change the rule, or give "
            "the rule an alternative that fits (`| replicated`)") for p in errors),
            ir.source_dict)
    return assignment, None


def _warn(ir: PlanIR, d: Diagnostic) -> None:
    warnings.warn(ConstraintNote(render_text((d,), ir.source_dict, color=False), (d,)),
                  stacklevel=4)


def constrain(ir: PlanIR, x, name: str, mesh=None):
    """`x` laid out as the `outputs` rule for `name` gives it; see the module docstring."""
    mesh, bound = target._mesh(ir, mesh)
    assignment, missing = _fitted(bound, name, _shape_of(x), "the value")
    if missing is not None:
        _warn(bound, missing)
        return x
    return target.place(x, target._shardings_of(bound, mesh, [assignment])[0])


def logical_constraint(ir: PlanIR, x, names, mesh=None):
    """`x` laid out by the logical names of its dimensions, through the plan's `axes`
    table (as `flax.linen.with_logical_constraint` does with its rules)."""
    mesh, bound = target._mesh(ir, mesh)
    layout = _fitted_names(bound, _names(names), _shape_of(x))
    return target.place(x, target._shardings_of(bound, mesh, [layout])[0])


def logical_spec(ir: PlanIR, names, shape=None) -> PartitionSpec:
    """The `PartitionSpec` the `axes` table gives an array whose dimensions are named
    `names` (as `flax.linen.logical_to_mesh_axes`); with `shape`, checked to divide."""
    names = _names(names)
    if shape is not None:
        return target._spec(_fitted_names(target._ir_for_devices(ir), names,
                                          tuple(shape)).layout)
    _, rule, _ = _names_rule(ir, names, None)
    dims = rule.layout.alternatives[0].head
    return target._spec(ResolvedLayout(tuple(d.entry for d in dims), (1,) * len(dims)))


def _names(names) -> tuple:
    if isinstance(names, str) or not isinstance(names, (tuple, list)) or not all(
            n is None or isinstance(n, str) for n in names):
        raise TypeError("names must be a tuple of logical names (str) or None, one per "
                        f"dimension, not {names!r}")
    return tuple(names)


def _names_rule(ir: PlanIR, names: tuple, shape):
    """(resolver, rule, value) for a value of `shape` (None: any of the names' rank) whose
    dimensions are named `names`: every name must have an `axes` entry (P101), and one
    stand for each dimension (P344)."""
    from planc.diagnostics.did_you_mean import did_you_mean

    if not ir.logical_axes:
        raise PlanError((error("P101", "the plan has no `axes` table to read logical names "
                               "through", ir.anchor, help="add `axes { NAME -> AXES ... }` "
                               "mapping each logical name to mesh axes"),), ir.source_dict)
    resolver = target._resolver(ir)
    known = {e.name for e in ir.logical_axes}
    problems: list = []
    for n in names:
        if n is not None and n not in known:
            problems.append(error("P101", f"unknown logical name `{n}`: the `axes` table has "
                                  "no entry for it", ir.logical_span,
                                  help=did_you_mean(n, sorted(known))
                                  or f"add `{n} -> AXES` (or `{n} -> _`) to the table"))
    value = Variable("the value", (0,) * len(names) if shape is None else shape, "float32",
                     names)
    usable = resolver.own_names(value, problems)
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)
    return resolver, resolver.names_rule(usable), value


def _fitted_names(ir: PlanIR, names: tuple, shape):
    """The assignment of a value of `shape` named `names`; P317 where the axes its names
    take do not divide it."""
    resolver, rule, value = _names_rule(ir, names, shape)
    layout, alt, misfits = resolver.fit(rule, shape)
    if alt < 0:
        raise PlanError(tuple(error(
            "P317", f"a value of shape {list(shape)} named {rule.layout.text} does not fit: "
            + resolver.indivisible_text(rule.layout.alternatives[0], value, m), ir.logical_span,
            label="the table it is laid out by",
            help="reshape the value, or give the name a fallback entry that divides it")
            for m in misfits if m.dim is not None), ir.source_dict)
    return Assignment(value, layout, rule, alt)


def activation_spec(ir: PlanIR, name: str, rank: int, mesh=None) -> PartitionSpec | None:
    """The `PartitionSpec` the `outputs` rules give a value `name` of `rank`, or None
    when no rule matches; only the rank decides (a shard_map output is divisible by
    construction)."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank must be a non-negative integer, not {rank!r}")
    sharding = target.output_sharding(ir, name, rank, mesh)
    return None if sharding is None else sharding.spec


def _is_spec_leaf(v) -> bool:
    return v is None or isinstance(v, (str, PartitionSpec))


def _specs(mesh, bound: PlanIR, specs, values, exact: bool, what: str):
    """`specs` (a prefix of `values`) with every name replaced by a tree of the specs its
    `outputs` rule gives each leaf below it: for its shape when `exact`, else for its
    rank (a shard_map output's global shape divides by construction)."""
    treedef = jax.tree_util.tree_structure(specs, is_leaf=_is_spec_leaf)
    subtrees = treedef.flatten_up_to(values)
    out = []
    for spec, subtree in zip(treedef.flatten_up_to(specs), subtrees):
        if not isinstance(spec, str):
            out.append(spec)
            continue

        def one(leaf, name=spec):
            shape = _shape_of(leaf)
            if not exact:
                sharding = target.output_sharding(bound, name, len(shape), mesh)
                if sharding is not None:
                    return sharding.spec
            assignment, missing = _fitted(bound, name, shape, what)
            if missing is not None:  # shard_map needs a spec: here it is an error
                raise PlanError((error("P318", missing.message, missing.span,
                                       help=missing.help),), bound.source_dict)
            return target._spec(assignment.layout)

        out.append(jax.tree_util.tree_map(one, subtree))
    return jax.tree_util.tree_unflatten(treedef, out)


def shard_map(ir: PlanIR, f, *, in_specs, out_specs, mesh=None, **kwargs):
    """`jax.shard_map(f, mesh=plan's mesh, in_specs=..., out_specs=...)` where a spec may
    be an `outputs` rule's name: an input takes the rule's spec for its shape (checked as
    `constrain` checks it), an output the spec for its rank (found by tracing `f` once
    more, abstractly, with replicated outputs). Other leaves (a
    `PartitionSpec`, `plan.data_sharding(rank).spec`) pass through. `kwargs` go to
    `jax.shard_map` (`check_vma=...`)."""
    mapper = require("shard_map", ir, needed_for="`plan.shard_map`")
    mesh, bound = target._mesh(ir, mesh)

    def mapped(*args):
        ins = _specs(mesh, bound, in_specs, args, True, "the input")
        if any(isinstance(v, str) for v in jax.tree_util.tree_leaves(
                out_specs, is_leaf=_is_spec_leaf)):
            probe = mapper(f, mesh=mesh, in_specs=ins, out_specs=PartitionSpec(),
                           check_vma=False)
            shapes = jax.eval_shape(probe, *args)
            outs = _specs(mesh, bound, out_specs, shapes, False, "the output")
        else:
            outs = out_specs
        return mapper(f, mesh=mesh, in_specs=ins, out_specs=outs, **kwargs)(*args)

    return mapped

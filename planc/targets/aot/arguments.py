"""The step's arguments as a training loop holds them: abstract values and the plan's
shardings.

- Leaves are used for their shape and dtype only (`jax.ShapeDtypeStruct`): an array is
  never read, nothing is allocated. A leaf with neither is P806.
- **Parameters** take the plan's layout rules. They are validated first, as `planc lint`
  validates a model (rank, divisibility, unmatched variables, the `per_device` budget):
  any error stops here, before anything is compiled, with its usual code.
- **Optimizer state** is laid out by `plan.shardings(opt_state, params=params)`'s rule:
  a leaf belongs to the parameter whose path is its longest "/"-suffix and whose shape
  is its shape, and takes the layout of the `state` rule matching that parameter, else
  the parameter's own (it mirrors it); any other leaf is replicated.
- **Memory kinds.** A layout `on host` (of a parameter or a slot) is an argument in
  pinned host memory: `Argument.host` says which leaves are.
- **The batch**: dimension 0 of each leaf over the batch axes, the rest unsplit
  (`plan.data_sharding(rank)`); a scalar leaf or a batch the axes do not divide is P312.

Each leaf keeps a label for the report's "largest arguments by rule": the rule that laid
it out (a mirrored slot, its parameter's rule; a slot a `state` rule lays out, that rule,
`state "mlp/.*" -> (fsdp, model) at plan.kd:9`), or what placed it.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from planc.diagnostics import Diagnostic, PlanError, error
from planc.ir import PlanIR
from planc.resolve import shard_bytes, validate
from planc.targets.jax import sharding as jax_target
from planc.targets.expressible import indivisible_batch, scalar_batch
from planc.variables import Variable

__all__ = ["Argument", "abstract", "laid_out", "mirrored", "with_specs", "batch", "rule_label",
           "StepProblem"]

_PYTHON_SCALARS = (bool, int, float, complex, np.number, np.bool_)


class StepProblem(Exception):
    """A problem with the step or its values (P805, P806, P809, P810): `diagnostic`."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class Argument:
    """One positional argument of the step: its name (`params`), abstract pytree, the
    pytree of its shardings, and per leaf `(path, bytes per device, label)`; `host` says
    per leaf whether it is in pinned host memory. For laid-out parameters, `rules` holds
    each leaf's plan rule (None: no rule) and `state_rules` the `state` rule laying out
    its optimizer slots (None: they mirror it); for optimizer state, `mirrors` holds each
    leaf's parameter index where it mirrors that parameter's layout (None: replicated, or
    laid out by a `state` rule)."""

    __slots__ = ("name", "tree", "shardings", "leaves", "mirrors", "rules", "state_rules",
                 "host")

    def __init__(self, name, tree, shardings, leaves, mirrors=None, rules=None,
                 state_rules=None):
        self.name = name
        self.tree = tree
        self.shardings = shardings
        self.leaves = leaves
        self.mirrors = mirrors if mirrors is not None else [None] * len(leaves)
        self.rules = rules if rules is not None else [None] * len(leaves)
        self.state_rules = state_rules if state_rules is not None else [None] * len(leaves)
        self.host = [getattr(s, "memory_kind", None) == "pinned_host"
                     for s in jax.tree_util.tree_leaves(shardings)]


def abstract(ir: PlanIR, name: str, tree):
    """`tree` with each leaf a `jax.ShapeDtypeStruct` of its shape and dtype."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    out = []
    for keys, leaf in leaves:
        if isinstance(leaf, jax.ShapeDtypeStruct):
            out.append(jax.ShapeDtypeStruct(leaf.shape, leaf.dtype))
        elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            try:
                out.append(jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype))
            except (TypeError, ValueError) as exc:
                raise StepProblem(_bad_leaf(ir, name, keys, leaf, str(exc))) from None
        elif isinstance(leaf, _PYTHON_SCALARS):  # as jnp.asarray would type it, unallocated
            dtype = leaf.dtype if isinstance(leaf, np.generic) else np.result_type(type(leaf))
            out.append(jax.ShapeDtypeStruct((), jax.dtypes.canonicalize_dtype(dtype)))
        else:
            raise StepProblem(_bad_leaf(ir, name, keys, leaf))
    return jax.tree_util.tree_unflatten(treedef, out)


def _bad_leaf(ir, name, keys, leaf, why=None) -> Diagnostic:
    from planc.sources.objects import key_text

    path = "/".join([name] + [key_text(k) for k in keys])
    what = why or f"a {type(leaf).__name__}, not an array or a `jax.ShapeDtypeStruct`"
    return error("P806", f"leaf `{path}` of the step's `{name}` is {what}", None,
                 file=ir.file, help="the step's params, optimizer state and batch are pytrees "
                 "of arrays or `jax.ShapeDtypeStruct`s (only their shapes and dtypes are read)")


def _dtype_name(dtype) -> str:
    return np.dtype(dtype).name


def _per_device(sds, sharding) -> int:
    shard = sharding.shard_shape(tuple(sds.shape))
    return shard_bytes(tuple(shard), _dtype_name(sds.dtype))


def rule_label(rule) -> str:
    """`"dense/kernel" -> (fsdp, model) at plan.kd:6`: a rule as the report names it."""
    if rule is None:
        return "no rule: replicated"
    where = f" at {rule.where}" if rule.span else ""
    return f"{rule.label} -> {rule.layout.text}{where}"


def laid_out(ir: PlanIR, mesh, name: str, tree, devices: int):
    """(`Argument`, the warnings and notes of validating it): `tree` laid out by the
    plan's rules. Errors raise one `PlanError` with every diagnostic, as lint reports them."""
    paths, _ = jax_target.tree_paths(tree)
    variables = tuple(Variable(p, tuple(int(d) for d in leaf.shape), _dtype_name(leaf.dtype))
                      for p, leaf in paths)
    report = validate(ir, variables, devices) if variables else None
    if report is not None and not report.ok:
        raise PlanError(report.diagnostics, {**ir.source_dict, **report.sources})
    shardings = jax_target.shardings(ir, tree, mesh)
    labels = ([rule_label(a.rule) for a in report.assignments]
              if report is not None else [])
    flat = jax.tree_util.tree_leaves(shardings)
    leaves = [(f"{name}/{p}", _per_device(leaf, s), label)
              for (p, leaf), s, label in zip(paths, flat, labels)]
    found = list(report.diagnostics) if report is not None else []
    rules = [a.rule for a in report.assignments] if report is not None else []
    state = {id(r) for r in (*ir.state, ir.state_default) if r is not None}
    state_rules = [s.rule if id(s.rule) in state else None
                   for s in report.slots] if report is not None and report.slots else None
    return Argument(name, tree, shardings, leaves, rules=rules, state_rules=state_rules), found


def mirrored(ir: PlanIR, mesh, name: str, tree, params: Argument):
    """`tree` (optimizer state) laid out as `plan.shardings(tree, params=...)` lays it out."""
    shardings = jax_target.shardings(ir, tree, mesh, params=params.tree)
    paths, _ = jax_target.tree_paths(tree)
    param_paths, _ = jax_target.tree_paths(params.tree)
    sources = jax_target.mirrored_parameters(ir, tree, params.tree, paths, param_paths)
    flat = jax.tree_util.tree_leaves(shardings)
    leaves, mirrors = [], []
    for (p, leaf), s, i in zip(paths, flat, sources):
        rule = params.state_rules[i] if i is not None else None
        if i is None:
            label = "optimizer state with no parameter of its shape: replicated"
        elif rule is not None:
            label = "state " + rule_label(rule)
        else:
            label = params.leaves[i][2]
        leaves.append((f"{name}/{p}", _per_device(leaf, s), label))
        mirrors.append(i if rule is None else None)
    return Argument(name, tree, shardings, leaves, mirrors)


def with_specs(name: str, tree, shardings, labels, mirrors=None, rules=None) -> Argument:
    """An argument whose shardings were worked out elsewhere (Keras's variables)."""
    paths, _ = jax_target.tree_paths(tree)
    flat = jax.tree_util.tree_leaves(shardings)
    leaves = [(f"{name}/{p}", _per_device(leaf, s), label)
              for (p, leaf), s, label in zip(paths, flat, labels)]
    return Argument(name, tree, shardings, leaves, mirrors, rules)


def batch(ir: PlanIR, mesh, name: str, tree) -> Argument:
    """`tree` split over the batch axes (dimension 0); P312 for a leaf it cannot be."""
    paths, treedef = jax_target.tree_paths(tree)
    total = math.prod(mesh.shape[a] for a in ir.batch_axes)
    problems = []
    for p, leaf in paths:
        shown = f"{name}/{p}" if p else name
        if len(leaf.shape) == 0:
            problems.append(scalar_batch(ir, shown))
        elif leaf.shape[0] % total:
            problems.append(indivisible_batch(ir, int(leaf.shape[0]), leaf=shown))
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)
    specs = [jax_target.data_sharding(ir, len(leaf.shape), mesh) for _, leaf in paths]
    axes = ", ".join(f"`{a}`" for a in ir.batch_axes)
    label = f"the batch: dimension 0 over {axes}"
    leaves = [(f"{name}/{p}" if p else name, _per_device(leaf, s), label)
              for (p, leaf), s in zip(paths, specs)]
    return Argument(name, tree, jax.tree_util.tree_unflatten(treedef, specs), leaves)

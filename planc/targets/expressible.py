"""What the targets can be given, and the diagnostics for what they cannot.

P311 (a layout the target cannot express) has one wording per cause, shared by the
Keras target (`plan.to_keras()`, `plan.layout_map`) and the Keras module `planc compile
--target keras` writes: a dimension or a batch split over several mesh axes (Keras's
`TensorLayout` takes one axis per dimension), a rule whose layout depends on the
tensor's shape where Keras looks a layout up by path alone, a layout `on host` (a
`TensorLayout` has no memory kind, and Keras computes on every variable where it
lies), and a `state` rule (Keras gives an optimizer variable its parameter's layout
itself, in `Optimizer.add_variable_from_reference`, asking no distribution); `plan.aot`
of a Keras model refuses the last two alike. P312 (a batch the batch axes do not divide)
has one wording, shared by the JAX and Keras targets.
"""

from __future__ import annotations

import math

from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.ir import PlanIR, Rule

__all__ = [
    "shape_free_axes", "splits_over_several_axes", "is_multi_axis", "all_rules",
    "check_expressible", "multi_axis_dimension", "explicit_axes_for_keras", "batch_over_several_axes",
    "shape_dependent_rule", "shape_dependent_output", "end_anchored_output",
    "indivisible_batch", "scalar_batch", "WITH_THE_MODEL", "WITH_THE_SHAPE",
    "keras_memory_and_state",
]

# What to do about a variable rule whose layout depends on the shape, where it is met.
WITH_THE_MODEL = ("compile with `--model SRC`: planc then writes one exact key per variable "
                  "this rule lays out")
WITH_THE_SHAPE = ("look it up with the shape: `layout_map[variable]`, "
                  "`layout_map.lookup(path, shape)` or the distribution from `plan.to_keras()`")


# -- what a layout is ------------------------------------------------------------------------

def shape_free_axes(rule: Rule):
    """The rule's axes when they do not depend on the tensor's shape, else None.

    `replicated` is `()` (P() is replicated at any rank); a single layout whose `...`
    comes last is its head (JAX leaves the trailing dimensions unsplit).
    """
    alts = rule.layout.alternatives
    if len(alts) != 1:
        return None
    alt = alts[0]
    if alt.replicated:
        return ()
    if alt.ellipsis and alt.tail:
        return None
    return tuple(d.entry for d in alt.head)


def splits_over_several_axes(rule: Rule) -> bool:
    """Whether some dimension of `rule`'s layout is split over several mesh axes."""
    return any(len(d.axes) > 1 for alt in rule.layout.alternatives
               for d in alt.head + alt.tail)


def is_multi_axis(entry) -> bool:
    """Whether a layout entry (None, an axis, a tuple of axes) names several axes."""
    return isinstance(entry, tuple)


def all_rules(ir: PlanIR):
    """Every rule of the plan, `layout` then `outputs`, each section's default last."""
    for rules, default in ((ir.rules, ir.default), (ir.outputs, ir.outputs_default)):
        yield from rules
        if default is not None:
            yield default


def check_expressible(ir: PlanIR, backend: str) -> None:
    """Raise `PlanError` (P311) for what Keras on `backend` cannot be given, before Keras
    fails: on the JAX backend planc passes a multi-axis dimension as a NamedSharding."""
    problems: list[Diagnostic] = keras_memory_and_state(ir)
    explicit = explicit_axes_for_keras(ir)
    if explicit is not None:
        problems.append(explicit)
    if backend != "jax":
        problems += [multi_axis_dimension(rule, backend) for rule in all_rules(ir)
                     if splits_over_several_axes(rule)]
        batch = batch_over_several_axes(ir, backend)
        if batch is not None:
            problems.append(batch)
    for rule in list(ir.outputs) + ([ir.outputs_default] if ir.outputs_default else []):
        if shape_free_axes(rule) is None:
            problems.append(shape_dependent_output(rule))
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)


# -- P311 ------------------------------------------------------------------------------------

def _p311(rule: Rule, message: str, label: str, help_text: str) -> Diagnostic:
    return error("P311", f"rule {rule.label} {message}", rule.span, label=label,
                 help=help_text, rule=rule.where)


def _on(backend: str | None) -> str:
    return f" on the `{backend}` backend" if backend else ""


def multi_axis_dimension(rule: Rule, backend: str | None = None) -> Diagnostic:
    """P311: `rule` splits a dimension over several mesh axes. `backend` is the Keras
    backend that cannot take it; None for the module `--target keras` writes."""
    return _p311(rule, "splits a dimension over several mesh axes, which Keras's TensorLayout "
                 f"cannot express{_on(backend)}", "multi-axis dimension",
                 "use the JAX target (`--target jax`), or `plan.to_keras()` on Keras's JAX "
                 "backend (KERAS_BACKEND=jax), where planc passes a NamedSharding; or split "
                 "the dimension over one axis")


def explicit_axes_for_keras(ir: PlanIR) -> Diagnostic | None:
    """P315 when the plan makes mesh axes `explicit`, else None: Keras builds `Auto`
    meshes, and planc does not downgrade the plan's axes behind its back."""
    if not ir.explicit_axes:
        return None
    axes = ", ".join(f"`{a}`" for a in ir.explicit_axes)
    return error("P315", f"the plan makes {axes} explicit, but Keras builds meshes whose axes "
                 "are all `auto`", ir.axis_types_span or _mesh_span(ir),
                 label="explicit axes", help="use the JAX target (`plan.mesh()`, `planc "
                 "compile --target jax`) for explicit sharding, or write `axis_types auto` "
                 "for the Keras target")


def batch_over_several_axes(ir: PlanIR, backend: str | None = None) -> Diagnostic | None:
    """P311 when the plan splits the batch over several axes, else None; `backend` as
    for `multi_axis_dimension`."""
    if len(ir.batch_axes) <= 1:
        return None
    axes = ", ".join(ir.batch_axes)
    what = ("`data_parallel` over a mesh of several axes" if ir.distribution == "data_parallel"
            else f"`model_parallel(batch = ({axes}))`")
    return error("P311", f"{what} splits the batch over several axes ({axes}), which Keras's "
                 f"TensorLayout cannot express{_on(backend)}", _mesh_span(ir),
                 label="mesh of the batch axes",
                 help="use the JAX target (`--target jax`), or `plan.to_keras()` on Keras's "
                      "JAX backend (KERAS_BACKEND=jax); or split the batch over one axis")


def shape_dependent_rule(rule: Rule, remedy: str) -> Diagnostic:
    """P311: the layout of variable rule `rule` depends on the shape, where a Keras key
    (a path) must have one; `remedy` (`WITH_THE_MODEL`, `WITH_THE_SHAPE`) says what to do."""
    return _p311(rule, f"has a layout that depends on the variable's shape "
                 f"(`{rule.layout.text}`), and a Keras key has one layout",
                 "depends on the shape", remedy)


def shape_dependent_output(rule: Rule) -> Diagnostic:
    """P311: the layout of output rule `rule` depends on the shape, and Keras looks a
    layer output's layout up by its path alone."""
    return _p311(rule, f"has a layout that depends on the activation's shape "
                 f"(`{rule.layout.text}`), but Keras looks outputs up by path alone",
                 "depends on the shape",
                 "write one layout that fits every output it matches (one alternative, "
                 "`...` only at the end)")


def end_anchored_output(rule: Rule) -> Diagnostic:
    """P311: output rule `rule`'s pattern asserts the end of the layer path, which Keras
    follows with `/output`."""
    return _p311(rule, "asserts the end of the layer path, but Keras looks the output up as "
                 "`<layer path>/output`", "end anchor",
                 "drop the `$` (under `match full` the pattern must match the whole layer "
                 "path anyway)")


def keras_memory_and_state(ir: PlanIR) -> list[Diagnostic]:
    """P311 for each rule that places a layout `on host` and each `state` rule: what the
    Keras target cannot give Keras, which would otherwise be dropped without a word."""
    out = [_p311(rule, "places its layout in pinned host memory (`on host`), which Keras's "
                 "TensorLayout cannot express: it has no memory kind, and Keras's training "
                 "step computes on every variable where it lies", "memory kind", _USE_JAX
                 + " (`plan.shardings`, `plan.init`, `planc compile --target jax`), or drop "
                 "`on host`")._replace(span=rule.layout.host_span or rule.span)
           for rule in ir.host_rules()]
    state = (*ir.state, *((ir.state_default,) if ir.state_default is not None else ()))
    out += [_p311(rule, "lays out optimizer slots apart from their parameter, which Keras "
                  "cannot be given: it lays out each optimizer variable as its parameter "
                  "itself (`Optimizer.add_variable_from_reference`), asking no "
                  "distribution", "state rule", _USE_JAX + " (`plan.shardings(opt_state, "
                  "params=params)`, `plan.init`, `planc compile --target jax`) for ZeRO-1, "
                  "or remove the `state` block for the Keras target")
            for rule in state]
    return out


_USE_JAX = "use the JAX target with optax"


# -- P312 ------------------------------------------------------------------------------------

def _mesh_span(ir: PlanIR) -> Span:
    return ir.mesh.span or Span.start_of(ir.file)


def _batch_axes(ir: PlanIR) -> tuple[int, str]:
    """(how many batch shards the bound plan has, the batch axes with their sizes)."""
    sizes = dict(zip(ir.mesh.names, ir.mesh.shape))
    total = math.prod(sizes[a] for a in ir.batch_axes)
    text = " x ".join(f"`{a}` (size {sizes[a]})" for a in ir.batch_axes)
    if len(ir.batch_axes) > 1:
        text += f" = {total}"
    return total, text


def indivisible_batch(ir: PlanIR, batch: int, *, leaf: str | None = None,
                      shards: int | None = None) -> Diagnostic:
    """P312: a batch of `batch` that the batch axes of bound `ir` do not divide.

    `leaf` is the batch's path in a pytree (None or "": the batch itself); `shards` the
    batch shards this process's devices hold, when it holds part of a global batch.
    """
    total, axes_text = _batch_axes(ir)
    what = ("a batch" if shards is None else "this process's batch") + f" of {batch}"
    what += f" (`{leaf}`)" if leaf else ""
    divisor = (f"the batch axes {axes_text}" if shards is None
               else f"the {shards} batch shards its devices hold (batch axes {axes_text})")
    lower = batch - batch % total
    examples = f"{lower} or {lower + total}" if lower else f"{total}"
    return error("P312", f"{what} is not divisible by {divisor}", _mesh_span(ir),
                 label="batch axes of this mesh", variable=leaf or None,
                 help=f"use a global batch that is a multiple of {total} (e.g. {examples}), "
                      "or drop the remainder (a dataset's last partial batch)")


def scalar_batch(ir: PlanIR, leaf: str | None = None) -> Diagnostic:
    """P312: a batch (or pytree leaf `leaf` of one) that is a scalar."""
    _, axes_text = _batch_axes(ir)
    name = f"`{leaf}`" if leaf else "the batch"
    return error("P312", f"{name} is a scalar: it has no batch dimension to split over "
                 f"{axes_text}", _mesh_span(ir), label="batch axes of this mesh",
                 variable=leaf or None)

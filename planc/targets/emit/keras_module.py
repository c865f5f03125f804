"""Writes a plan as a Python module that needs only Keras 3 (`--target keras`).

`planc compile plan.kd --target keras -o plan_keras.py` calls `module_text`. The module
holds the plan as `keras.distribution` data, a `LayoutMap` of variable rules and one of
layer-output rules, and builds `DeviceMesh`, `LayoutMap`, `DataParallel` or a small
`ModelParallel` subclass from them:

    MESH_AXES, MESH_SHAPE, SLICES, BATCH_AXES, VARIABLE_LAYOUTS, OUTPUT_LAYOUTS
    device_mesh(devices=None) -> keras.distribution.DeviceMesh
    layout_map(mesh=None) -> keras.distribution.LayoutMap      (variables)
    output_map(mesh=None) -> keras.distribution.LayoutMap      ("<layer>/output" keys)
    distribution(devices=None) -> DataParallel | PlanModelParallel

How planc's semantics become Keras keys, so that the module answers as planc does
under Keras <= 3.13 (`re.search`) and >= 3.14 (`re.fullmatch`) alike:

- **Keys.** Anchored, with planc's precedence written in as negative lookaheads: see
  `planc.targets.emit.keras_keys`.
- **Two namespaces.** Output rules are looked up only for layer outputs and variable
  rules only for variables (`PlanModelParallel` overrides `get_tensor_layout`), and
  scalars (optimizer step, metric totals) are always replicated.
- **Shapes.** A Keras key has one layout; a rule whose layout depends on the shape
  (alternatives `|`, or `...` before other dimensions) is written as one exact key per
  variable it lays out, resolved against the model (`--model`); without a model it is
  P311. `(model, ...)` is the prefix `("model",)` and `replicated` is `()`:
  `PlanModelParallel` fills a variable's remaining dimensions with None, and JAX leaves
  an activation's trailing dimensions unsplit. A block (`model[128]`) is a divisibility
  check planc already made, kept as a comment.
- **Not expressible** (P311, worded in `planc.targets.expressible`): a dimension or a
  batch split over several mesh axes (`TensorLayout` rejects them; use the JAX target or
  `plan.to_keras()` on the JAX backend), an output rule whose layout depends on the
  shape or whose pattern has an end anchor (`$`, `\\Z`: in Keras the layer path is
  followed by `/output`), a layout `on host` and a `state` rule (see
  `keras_memory_and_state`).

Its runtime is planc's own code, copied (see `planc.targets.emit.codegen`): the binding of
`planc.targets.emit.runtime.binding` with planc's `check` evaluator; the device order of
`planc.targets.devices`, so that on the JAX backend `device_mesh()` arranges
`jax.devices()` as `plan.mesh()` and the JAX module do (on other backends it reshapes
`list_devices()` row-major); the check of `planc.targets.emit.runtime.keras_support` that Keras's
distribution API runs on the backend (Keras releases without it on torch take a
LayoutMap and ignore it); and `planc.targets.emit.runtime.for_keras`.
"""

from __future__ import annotations

import re

from planc._version import __version__
from planc.check.expression import _eval
from planc.diagnostics import Diagnostic, PlanError
from planc.ir import PlanIR, Rule
from planc.matching.scan import has_end_anchor
from planc.targets.emit.codegen import (check_constants, docstring_name, literal,
                                        mesh_constants, refuse_backtracking, refuse_errors,
                                        refuse_names_without_model,
                                        runtime_source, section_source)
from planc.targets.expressible import (WITH_THE_MODEL, batch_over_several_axes,
                                       end_anchored_output, explicit_axes_for_keras,
                                       keras_memory_and_state, multi_axis_dimension,
                                       shape_dependent_output, shape_dependent_rule,
                                       shape_free_axes, splits_over_several_axes)
from planc.targets.emit.keras_keys import SectionKeys, anchored_key
from planc.targets.emit.runtime.binding import _bind, _run_checks

__all__ = ["module_text"]


def module_text(ir: PlanIR, resolution=None, *, module: str = "plan_keras") -> str:
    """The text of a module that builds the plan's Keras distribution with only Keras.

    `ir` is the plan, bound to a device count or not; `resolution` (a
    `planc.resolve.Resolution` of `ir`, from `--model`) lets rules whose layout depends
    on the shape be written as exact keys. Raises `PlanError`: the errors of
    `resolution`, else P311 for each rule Keras cannot express. `module` is the name its
    docstring imports it by (`codegen.import_name`). Deterministic: the same plan,
    resolution and name give the same bytes.
    """
    refuse_errors(ir, resolution)
    refuse_names_without_model(ir, resolution)
    refuse_backtracking(ir)
    problems: list[Diagnostic] = keras_memory_and_state(ir)
    for problem in (explicit_axes_for_keras(ir), batch_over_several_axes(ir)):
        if problem is not None:
            problems.append(problem)
    var_lines, out_lines = _entries(ir, resolution, problems)
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)
    out = [_HEADER.format(name=docstring_name(ir.name), version=__version__, module=module)]
    out.append("import keras\nfrom keras import distribution as kd\n\n")
    out.append(f"PLAN_NAME = {literal(ir.name)}\n")
    out.append(f"PLANC_VERSION = {literal(__version__)}\n")
    out.append(mesh_constants(ir))
    out.append(check_constants(ir))
    out.append(f"# Variable rules (`match {ir.match}`, `overlap {ir.overlap}`): key -> "
               "TensorLayout axes.\n")
    out.append("VARIABLE_LAYOUTS = {\n" + "".join(var_lines) + "}\n\n")
    out.append("# Layer-output rules, looked up as \"<layer path>/output\" by "
               "get_tensor_layout only.\n")
    out.append("OUTPUT_LAYOUTS = {\n" + "".join(out_lines) + "}\n\n\n")
    out.append(_runtime())
    return "".join(out)


def _runtime() -> str:
    return runtime_source(_bind, _eval, _run_checks,
                          section_source("planc.targets.devices", "device order"),
                          section_source("planc.targets.emit.runtime.keras_support", "distribution support"),
                          section_source("planc.targets.emit.runtime.for_keras", "runtime"))


# -- what each rule becomes ----------------------------------------------------------------

def _entries(ir: PlanIR, resolution, problems: list) -> tuple[list[str], list[str]]:
    """Lines of VARIABLE_LAYOUTS and OUTPUT_LAYOUTS; P311s appended to `problems`."""
    var_keys = SectionKeys(ir, "layout")
    out_keys = SectionKeys(ir, "outputs")
    if ir.distribution != "model_parallel":
        resolution = None
    # By identity: `resolution` resolved these very rules, and equality is deep.
    laid_out: dict[int, list] = {}
    for a in () if resolution is None else resolution.assignments:
        laid_out.setdefault(id(a.rule), []).append(a)

    var_lines: list[str] = []
    for rule, axes in _one_axis_a_dimension(ir.rules, ir.default, problems):
        if axes is not None:
            if rule.is_default and axes == ():
                var_lines.append(_comment(rule, "(Keras replicates what no key matches)"))
                continue
            var_lines.append(_comment(rule))
            var_lines.append(f"    {_key_literal(var_keys.key(rule))}: {_axes_literal(axes)},\n")
            continue
        if resolution is None:
            problems.append(shape_dependent_rule(rule, WITH_THE_MODEL))
            continue
        won = laid_out.get(id(rule), [])
        var_lines.append(_comment(rule, f"resolved against the model: {len(won)} variable"
                                        f"{'s' if len(won) != 1 else ''}"))
        for a in won:
            key = anchored_key(re.escape(a.variable.path))
            var_lines.append(f"    {_key_literal(key)}: {_axes_literal(a.layout.axes)},"
                             f"  # shape {list(a.variable.shape)}\n")

    out_lines: list[str] = []
    for rule, axes in _one_axis_a_dimension(ir.outputs, ir.outputs_default, problems):
        if axes is None:
            problems.append(shape_dependent_output(rule))
            continue
        if not rule.is_default and has_end_anchor(rule.pattern):
            problems.append(end_anchored_output(rule))
            continue
        out_lines.append(_comment(rule))
        out_lines.append(f"    {_key_literal(out_keys.key(rule))}: {_axes_literal(axes)},\n")
    return var_lines, out_lines


def _one_axis_a_dimension(rules, default, problems: list):
    """(rule, its axes) of `rules` then `default`, the axes None where they depend on a
    variable's shape; a rule that splits a dimension over several axes is left out, its
    P311 appended to `problems`."""
    for rule in (*rules, *(() if default is None else (default,))):
        if splits_over_several_axes(rule):
            problems.append(multi_axis_dimension(rule))
        else:
            yield rule, shape_free_axes(rule)


def _has_blocks(rule: Rule) -> bool:
    return any(d.block != 1 for a in rule.layout.alternatives for d in a.head + a.tail)


def _where(rule: Rule) -> str:
    return re.sub(r"[^A-Za-z0-9_./:-]", "?", rule.where)


def _comment(rule: Rule, note: str = "") -> str:
    what = "default" if rule.is_default else f"rule {rule.index + 1}"
    text = f"    # {_where(rule)} ({what}) -> {rule.layout.text}"
    if _has_blocks(rule):
        text += "  [blocks: a size check planc made; Keras splits evenly]"
    return text + (f"  {note}" if note else "") + "\n"


def _axes_literal(axes) -> str:
    return literal(tuple(axes))


def _key_literal(key: str) -> str:
    """A raw string literal when that reads the same, else `ascii()`."""
    printable = all(" " <= c <= "~" for c in key)
    if printable and "'" not in key and not key.endswith("\\"):
        return f"r'{key}'"
    return ascii(key)


_HEADER = '''\
"""Keras distribution for plan {name!s}, compiled by planc {version}. Generated: do not edit.

Needs only Keras 3 (`keras.distribution`; on the JAX backend, jax for the device order):

    import {module} as plan_keras
    with plan_keras.distribution().scope():    # or kd.set_distribution(...)
        model = build_model()

Every key is anchored, `^(?:...)$`, so it means the same under Keras <= 3.13
(re.search) and >= 3.14 (re.fullmatch); planc's precedence (`overlap first`, a rule
whose pattern is a path, `default`) is written into the keys as negative lookaheads.
Variable rules never lay out activations and output rules never lay out variables.
"""

'''

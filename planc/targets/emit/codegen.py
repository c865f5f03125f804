"""What the two emitters (`jax_module`, `keras_module`) share: Python literals, the
constants every emitted module starts with, the copied source of its runtime, and (with
the json target) the refusal of a model the plan has errors against.

Plan text never becomes code: every string from the plan or the model (patterns,
names, paths) is written with `ascii()`, a Python literal made of printable ASCII, so
quotes, backslashes, `\"\"\"` and line separators stay inside their literal.

An emitted module's runtime is planc's own code, copied: functions of the package
(`inspect.getsource`), and sections of the modules written to be copied (`devices`,
`runtime.for_jax`, `runtime.for_keras`), which import jax or Keras and so are read without
being run. Pieces are joined two blank lines apart, as top-level code is laid out.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import os
import re

from planc.diagnostics import PlanError, error
from planc.ir import PlanIR
from planc.lazy import module_source

__all__ = ["literal", "docstring_name", "mesh_constants", "check_constants", "refuse_errors",
           "refuse_backtracking", "refuse_names_without_model", "section_source", "runtime_source"]

# A line that starts a section of a module written to be copied; the section runs to the
# next such line or to the end of the module.
_MARKER = "# -- copied into emitted modules: "


def literal(value) -> str:
    """A deterministic Python literal for None, bools, ints, strings and tuples.

    Strings go through `ascii()`, so the text is printable ASCII whatever they hold.

    >>> literal(("dense/kernel", None, 2))
    "('dense/kernel', None, 2)"
    """
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return ascii(value)
    if isinstance(value, tuple):
        if len(value) == 1:
            return "(" + literal(value[0]) + ",)"
        return "(" + ", ".join(literal(v) for v in value) + ")"
    raise TypeError(f"cannot write {type(value).__name__} as a literal")


def docstring_name(name: str) -> str:
    """The plan's name as the module docstring shows it. The name may come from a file
    stem: only safe characters reach the docstring."""
    return re.sub(r"[^A-Za-z0-9_.-]", "?", name)


def import_name(output: str | None, default: str) -> str:
    """The name the emitted module is imported by: the stem of the file it is written to
    (`-o gemma_sharding.py` -> `gemma_sharding`) when that is a Python identifier, else
    `default` (written to stdout, or a stem such as `my-plan` that no import statement
    can name).

    >>> import_name("out/gemma_sharding.py", "plan_sharding"), import_name(None, "plan_sharding")
    ('gemma_sharding', 'plan_sharding')
    """
    if output is None:
        return default
    stem = os.path.splitext(os.path.basename(os.fspath(output)))[0]
    ascii_id = stem.isascii() and stem.isidentifier() and not keyword.iskeyword(stem)
    return stem if ascii_id else default


def mesh_constants(ir: PlanIR) -> str:
    """The mesh of a plan as module constants."""
    return (f"MESH_AXES = {literal(ir.mesh.names)}\n"
            "# Global axis sizes (per-slice size x slices); None: `auto`, resolved from the "
            "device count.\n"
            f"MESH_SHAPE = {literal(ir.mesh.shape)}\n"
            f"SLICES = {literal(ir.mesh.slice_shape)}\n"
            f"BATCH_AXES = {literal(ir.batch_axes)}\n"
            f"DISTRIBUTION = {literal(ir.distribution)}\n")


def check_constants(ir: PlanIR) -> str:
    """`PARAMS` and `CHECKS`: what the emitted `_run_checks` evaluates once `auto` is bound."""
    params = tuple((k, v) for k, v in ir.params if isinstance(v, int) and not isinstance(v, bool))
    checks = tuple((c.expr, c.message, tuple(c.names)) for c in ir.checks)
    return f"PARAMS = dict({literal(params)})\nCHECKS = {literal(checks)}\n\n"


def refuse_errors(ir: PlanIR, resolution) -> None:
    """Raise `PlanError` with the errors of `resolution` (the model resolved against
    `ir`, or None): no module is written for a plan with errors against its model."""
    errors = () if resolution is None else tuple(d for d in resolution.diagnostics
                                                 if d.is_error)
    if errors:
        raise PlanError(errors, ir.source_dict)


def refuse_names_without_model(ir: PlanIR, resolution) -> None:
    """Raise `PlanError` (P142) for a plan whose only layout is its `axes` table, compiled
    without the model: a module matches paths by the plan's rules and, with no rule and
    no variable's own names (which only the model holds), would refuse every variable
    when run. With the model, each variable's layout is resolved into the module's
    table."""
    if (resolution is not None or not ir.logical_axes or ir.rules or ir.default is not None
            or ir.distribution != "model_parallel"):
        return
    raise PlanError((error(
        "P142", "the plan lays variables out only by their own logical names (its `axes` "
                "table), which a compiled module cannot read: compiled without the model, "
                "the module would find a layout for no variable when it runs",
        ir.logical_span, label="the plan's only layout",
        help="pass --model SRC (a model whose variables carry these names, such as a Flax "
             "model's manifest): the module then holds each variable's layout; or write "
             "`layout` rules"),), ir.source_dict)


def refuse_backtracking(ir: PlanIR) -> None:
    """Raise `PlanError` with P314 for each rule an emitted module could not match in
    bounded time: the modules match with Python's `re`, which backtracks."""
    from planc.matching.backtracking import exponential

    errors = tuple(
        error("P314", "pattern may take exponential time in Python's `re`, which the "
              "emitted module matches with", rule.pattern_span,
              label="a backtracking engine tries each way it can match",
              help="make each repetition match one way, e.g. `(\\w+_?)+` as "
                   "`\\w+(_\\w+)*`; planc itself matches it in linear time")
        for rule in (*ir.rules, *ir.outputs)
        if rule.pattern is not None and exponential(rule.pattern))
    if errors:
        raise PlanError(errors, ir.source_dict)


@functools.lru_cache(maxsize=None)
def section_source(module_name: str, section: str) -> str:
    """The text of `section` of module `module_name`: the lines after its line
    `# -- copied into emitted modules: SECTION --`, to the next such line or the end.

    The module is read without running it (`planc.lazy.module_source`): a module written
    to be copied imports what the emitted module imports (jax, or Keras), which writing
    the module needs neither of.
    """
    text = module_source(module_name)
    start = text.index(f"{_MARKER}{section} --")
    start = text.index("\n", start) + 1
    end = text.find("\n" + _MARKER, start)
    body = text[start:] if end < 0 else text[start:end + 1]
    return body.strip("\n") + "\n"


def runtime_source(*pieces) -> str:
    """The runtime text of an emitted module: `pieces` in order, two blank lines apart.

    A piece is a function of planc (its source, `inspect.getsource`) or the text of a
    section (`section_source`). The same pieces give the same bytes.
    """
    return "\n\n".join(p if isinstance(p, str) else inspect.getsource(p) for p in pieces)

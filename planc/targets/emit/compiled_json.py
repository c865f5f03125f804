"""The json target: the resolved plan as JSON, schema `planc.compiled/1`, and the
plan's fingerprint, which every target writes.

`planc compile PLAN --target json` calls `compiled_json`. With `--model`, the layout of
every variable of the model is embedded as `table`. The output depends only on the
plan and the model: it is byte-identical across runs and `PYTHONHASHSEED` values.

Schema `planc.compiled/1` (keys in this order; `ensure_ascii` JSON, 2-space indent):

    {
      "schema": "planc.compiled/1",
      "plan": NAME,
      "fingerprint": SHA256 HEX (see `fingerprint`),
      "planc_version": VERSION (`planc.__version__`),
      "params": {NAME: VALUE, ...},
      "mesh": {"axes": [NAME, ...], "shape": [SIZE | null, ...],   # global sizes; null: auto
               "slices": [N, ...], "devices": N | null},
      "axis_types": ["auto" | "explicit", ...],   # per mesh axis; only when one is explicit
      "distribution": "data_parallel" | "model_parallel",
      "batch_axes": [NAME, ...],
      "match": "full" | "search",
      "overlap": "error" | "first",
      "rules": [RULE, ...],                # the `layout` block, file order
      "default": LAYOUT | null,
      "outputs": [RULE, ...],              # the `outputs` block
      "outputs_default": LAYOUT | null,
      "renames": [RENAME, ...],            # the `rename` blocks, file order
      "state": [RULE, ...],                # only with a `state` block: its rules,
      "state_default": LAYOUT | null,      #   matched by a parameter's path
      "table": {PATH: ENTRY, ...} | null   # with --model: every variable, model order
    }
    RULE   = {"pattern": REGEX, "layout": LAYOUT}
    RENAME = {"pattern": REGEX, "template": TEMPLATE, "transpose": bool}
    LAYOUT = {"text": "(model, _) | replicated", "alternatives": [ALT, ...],
              "host": true}                 # `host` only for a layout `on host`
    ALT    = {"replicated": bool, "head": [DIM, ...], "ellipsis": bool, "tail": [DIM, ...]}
    DIM    = {"axes": [NAME, ...], "block": N}          # axes [] = not split
    ENTRY  = {"shape": [N, ...], "dtype": DTYPE,
              "partition_spec": [null | NAME | [NAME, ...], ...],
              "rule": INDEX | -1 | null}                # -1: default; null: no rule
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json

from planc._version import __version__
from planc.diagnostics import Span
from planc.ir import Alternative, Check, PlanIR, Rule
from planc.targets.emit.codegen import refuse_errors

__all__ = ["fingerprint", "bound_fingerprint", "compiled_json"]

SCHEMA = "planc.compiled/1"

# Fields that say where a plan came from, not what it means.
_NOT_MEANING = {"file", "sources", "diagnostics", "layout_span", "rename_span", "span"}
# Fields added after fingerprints were first published: left out while empty, so a plan
# that does not use them keeps the fingerprint it always had.
_LEFT_OUT_EMPTY = {"renames", "axis_types", "peak", "state", "state_default", "host"}


def _canonical(value):
    if isinstance(value, Check):
        # The fingerprint keeps its own form of a `check` expression (operator first), so
        # a plan's fingerprint does not move when the IR's encoding does.
        return {"__type__": "Check", "key": _canonical(_operator_first(value.expr)),
                "message": value.message, "names": _canonical(value.names)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {"__type__": type(value).__name__}
        for f in dataclasses.fields(value):
            if not f.compare or f.name in _NOT_MEANING:
                continue
            item = getattr(value, f.name)
            if isinstance(item, Span) or (f.name in _LEFT_OUT_EMPTY and not item):
                continue
            out[f.name] = _canonical(item)
        return out
    if isinstance(value, enum.Enum):
        return _canonical(value.value)
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)
    raise TypeError(f"cannot fingerprint a {type(value).__name__}")


def _operator_first(expr: tuple) -> tuple:
    kind = expr[0]
    if kind in ("int", "name"):
        return expr
    return (expr[1], *(_operator_first(e) for e in expr[2:]))


def fingerprint(ir: PlanIR) -> str:
    """The plan's identity: SHA-256 (hex) of its meaning as written (parameters after
    their overrides, `auto` unresolved), every IR field but source locations and file
    names, serialised as sorted-key JSON. Equal for the same plan text wherever the file
    lives, whatever device count it is bound to (`with_devices`, `--devices`), and
    independent of `PYTHONHASHSEED`. `plan.fingerprint`, the emitted modules'
    `FINGERPRINT`, `planc.compiled/1` and a checkpoint's record all show this one."""
    if ir.written_mesh is not None:
        ir = ir._replace(mesh=ir.written_mesh, written_mesh=None)
    return bound_fingerprint(ir)


def bound_fingerprint(ir: PlanIR) -> str:
    """The fingerprint of `ir` with its mesh as it is now (`auto` resolved when a device
    count is bound): what a checkpoint records as `fingerprint_bound`."""
    text = json.dumps(_canonical(ir), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# -- JSON -------------------------------------------------------------------------------

def _entry_json(entry):
    if entry is None or isinstance(entry, str):
        return entry
    return list(entry)


def _alt_json(a: Alternative) -> dict:
    dim = lambda d: {"axes": list(d.axes), "block": d.block}  # noqa: E731
    return {"replicated": a.replicated, "head": [dim(d) for d in a.head],
            "ellipsis": a.ellipsis, "tail": [dim(d) for d in a.tail]}


def _layout_json(rule: Rule | None):
    if rule is None:
        return None
    out = {"text": rule.layout.text,
           "alternatives": [_alt_json(a) for a in rule.layout.alternatives]}
    if rule.layout.host:
        out["host"] = True
    return out


def compiled_json(ir: PlanIR, resolution=None) -> str:
    """The `planc.compiled/1` document for `ir` (see the module docstring).

    `resolution` (a `planc.resolve.Resolution` of `ir`, from `--model`) is written as
    `table`; its errors raise `PlanError` (nothing is written for a plan with errors
    against its model).
    """
    refuse_errors(ir, resolution)
    doc = {
        "schema": SCHEMA,
        "plan": ir.name,
        "fingerprint": fingerprint(ir),
        "planc_version": __version__,
        "params": {k: v for k, v in ir.params},
        "mesh": {"axes": list(ir.mesh.names), "shape": list(ir.mesh.shape),
                 "slices": list(ir.mesh.slice_shape), "devices": ir.mesh.device_count},
        **({"axis_types": list(ir.axis_types)} if ir.axis_types else {}),
        "distribution": ir.distribution,
        "batch_axes": list(ir.batch_axes),
        "match": ir.match,
        "overlap": ir.overlap,
        "rules": [{"pattern": r.pattern, "layout": _layout_json(r)} for r in ir.rules],
        "default": _layout_json(ir.default),
        "outputs": [{"pattern": r.pattern, "layout": _layout_json(r)} for r in ir.outputs],
        "outputs_default": _layout_json(ir.outputs_default),
        "renames": [{"pattern": r.pattern, "template": r.template, "transpose": r.transpose}
                    for r in ir.renames],
        **({"state": [{"pattern": r.pattern, "layout": _layout_json(r)} for r in ir.state],
            "state_default": _layout_json(ir.state_default)} if ir.has_state_rules else {}),
        "table": None if resolution is None else {
            a.variable.path: {"shape": list(a.variable.shape), "dtype": a.variable.dtype,
                              "partition_spec": [_entry_json(e) for e in a.layout.axes],
                              "rule": None if a.rule is None else a.rule.index}
            for a in resolution.assignments},
    }
    return json.dumps(doc, indent=2, ensure_ascii=True) + "\n"

"""The json target: the resolved plan as JSON, schema `planc.compiled/1`.

`planc compile PLAN --target json` calls `compiled_json`. With `--model`, the layout of
every variable of the model is embedded as `table`. The output depends only on the
plan and the model: it is byte-identical across runs and `PYTHONHASHSEED` values.

Schema `planc.compiled/1` (keys in this order; `ensure_ascii` JSON, 2-space indent):

    {
      "schema": "planc.compiled/1",
      "plan": NAME,
      "fingerprint": SHA256 HEX (see `planc.fingerprint`),
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

import json

from planc._version import __version__
from planc.fingerprint import fingerprint
from planc.ir import Alternative, PlanIR, Rule
from planc.targets.emit.codegen import refuse_errors

__all__ = ["compiled_json"]

SCHEMA = "planc.compiled/1"

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

"""`planc compile`: a plan as a file people run.

    planc compile PLAN [-D NAME=VALUE ...] [--model SRC] [--devices N]
                  [--target jax|keras|json] [-o FILE]

- `--target jax` (default) writes a Python module that needs only `jax`, `numpy` and
  `re` (see `planc.emit_jax`).
- `--target json` writes the resolved plan as JSON, schema `planc.compiled/1` (below).
- `--target keras` writes a module that needs only `keras` (`planc.emit_keras`).

With `--model`, the plan is resolved against the model's variables first: any error
(an unmatched matrix, an ambiguous match, a rank or divisibility misfit) refuses the
output (exit 1, diagnostics on stderr, nothing written); otherwise the resolved table
is embedded. `--devices N` binds `auto` for N devices before anything else, so the
table's divisibility checks cover every axis.

The output depends only on the plan and the model: it is byte-identical across runs
and `PYTHONHASHSEED` values. `-o FILE` is written atomically (`planc.fileio.atomic_write`):
on any error no file is created and an existing one is left as it was. Without `-o`
the output goes to stdout; diagnostics always go to stderr.

Schema `planc.compiled/1` (keys in this order; `ensure_ascii` JSON, 2-space indent):

    {
      "schema": "planc.compiled/1",
      "plan": NAME,
      "fingerprint": SHA256 HEX (see `fingerprint`),
      "planc_version": "0.1.0",
      "params": {NAME: VALUE, ...},
      "mesh": {"axes": [NAME, ...], "shape": [SIZE | null, ...],   # global sizes; null: auto
               "slices": [N, ...], "devices": N | null},
      "distribution": "data_parallel" | "model_parallel",
      "batch_axes": [NAME, ...],
      "match": "full" | "search",
      "overlap": "error" | "first",
      "rules": [RULE, ...],                # the `layout` block, file order
      "default": LAYOUT | null,
      "outputs": [RULE, ...],              # the `outputs` block
      "outputs_default": LAYOUT | null,
      "table": {PATH: ENTRY, ...} | null   # with --model: every variable, model order
    }
    RULE   = {"pattern": REGEX, "layout": LAYOUT}
    LAYOUT = {"text": "(model, _) | replicated", "alternatives": [ALT, ...]}
    ALT    = {"replicated": bool, "head": [DIM, ...], "ellipsis": bool, "tail": [DIM, ...]}
    DIM    = {"axes": [NAME, ...], "block": N}          # axes [] = not split
    ENTRY  = {"shape": [N, ...], "dtype": DTYPE,
              "partition_spec": [null | NAME | [NAME, ...], ...],
              "rule": INDEX | -1 | null}                # -1: default; null: no rule
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import hashlib
import json
import sys

from planc._version import __version__
from planc.diagnostics import Diagnostic, PlanError, Severity, Span, error
from planc.ir import Alternative, Check, PlanIR, Rule

__all__ = ["run_compile", "fingerprint", "compiled_json", "resolve_model"]

SCHEMA = "planc.compiled/1"

# Fields that say where a plan came from, not what it means.
_NOT_MEANING = {"file", "sources", "diagnostics", "layout_span", "span"}


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
            if isinstance(item, Span):
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
    """SHA-256 (hex) of the plan's meaning: every IR field but source locations and file
    names, serialised as sorted-key JSON. Equal for the same plan text wherever the file
    lives, and independent of `PYTHONHASHSEED`."""
    text = json.dumps(_canonical(ir), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# -- resolution against a model ------------------------------------------------------------

def resolve_model(ir: PlanIR, variables):
    """`(table, diagnostics)`: `[(variable, axes, rule index | -1 | None)]` in model order,
    and what resolving found (errors, warnings and notes)."""
    from planc.resolve.resolver import Resolver

    resolution = Resolver(ir).resolve_all(variables)
    table = []
    for a in resolution.assignments:
        rule = None if a.rule is None else a.rule.index
        table.append((a.variable, a.layout.axes, rule))
    return table, list(resolution.diagnostics)


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
    return {"text": rule.layout.text,
            "alternatives": [_alt_json(a) for a in rule.layout.alternatives]}


def compiled_json(ir: PlanIR, fp: str, table=None) -> str:
    """The `planc.compiled/1` document for `ir` (see the module docstring)."""
    doc = {
        "schema": SCHEMA,
        "plan": ir.name,
        "fingerprint": fp,
        "planc_version": __version__,
        "params": {k: v for k, v in ir.params},
        "mesh": {"axes": list(ir.mesh.names), "shape": list(ir.mesh.shape),
                 "slices": list(ir.mesh.slice_shape), "devices": ir.mesh.device_count},
        "distribution": ir.distribution,
        "batch_axes": list(ir.batch_axes),
        "match": ir.match,
        "overlap": ir.overlap,
        "rules": [{"pattern": r.pattern, "layout": _layout_json(r)} for r in ir.rules],
        "default": _layout_json(ir.default),
        "outputs": [{"pattern": r.pattern, "layout": _layout_json(r)} for r in ir.outputs],
        "outputs_default": _layout_json(ir.outputs_default),
        "table": None if table is None else {
            v.path: {"shape": list(v.shape), "dtype": v.dtype,
                     "partition_spec": [_entry_json(e) for e in axes], "rule": rule}
            for v, axes, rule in table},
    }
    return json.dumps(doc, indent=2, ensure_ascii=True) + "\n"


# -- the command ----------------------------------------------------------------------------

def _refusal(ir: PlanIR, errors: int, model: str) -> Diagnostic:
    span = ir.layout_span or ir.mesh.span
    return error("P313", f"not compiled: the plan has {errors} error"
                 f"{'s' if errors != 1 else ''} against the model `{model}`", span,
                 label="plan", help="fix the errors above; `planc explain` shows the "
                                    "layout of every variable")


def run_compile(args) -> int:
    """The `planc compile` command; returns the exit code (0, 1 plan errors, 2 usage)."""
    from planc.cli.common import (EXIT_OK, EXIT_PLAN, UsageError, emit_diagnostics, load, load_model,
                      parse_defines, parse_devices)

    # Diagnostics never go to -o FILE: that is where the compiled output belongs.
    report_args = argparse.Namespace(**{**vars(args), "output": None})

    def report(diags, sources) -> None:
        shown = [d for d in diags if d.severity is not Severity.NOTE]
        if shown:
            emit_diagnostics(shown, sources, report_args, stream=sys.stderr)

    defines = parse_defines(args.defines)
    counts = parse_devices(getattr(args, "devices", None))
    if len(counts) > 1:
        raise UsageError(f"compile takes one device count, not `{args.devices}`")
    plan, diags, sources = load(args.plan, defines, getattr(args, "allow_include_outside", False))
    if plan is None:
        report(diags, sources)
        return EXIT_PLAN
    try:
        if counts:
            plan = plan.with_devices(counts[0])
        ir = plan.ir
        variables = load_model(args.model) if args.model else None
        table = None
        if variables is not None:
            table, found = resolve_model(ir, variables)
            diags = diags + found
            errors = sum(1 for d in found if d.is_error)
            if errors:
                report(diags + [_refusal(ir, errors, args.model)], sources)
                return EXIT_PLAN
        text = _render(args.target, plan, ir, variables, table)
    except PlanError as exc:
        report(list(exc.diagnostics), exc.sources or sources)
        return EXIT_PLAN
    report(diags, sources)
    _write(args.output, text, UsageError)
    return EXIT_OK


def _render(target: str, plan, ir: PlanIR, variables, table) -> str:
    from planc.cli.common import UsageError

    if target == "json":
        return compiled_json(ir, fingerprint(ir), table)
    if target == "keras":
        try:
            from planc.targets.keras_module import emit_keras_module
        except ImportError as exc:
            raise UsageError(f"keras target not available: {exc}") from None
        return emit_keras_module(plan, variables=variables)
    from planc.targets.jax_module import module_text

    rows = None if table is None else [(v.path, v.shape, axes) for v, axes, _ in table]
    return module_text(ir, fingerprint(ir), rows)


def _write(path: str | None, text: str, usage_error) -> None:
    if not path:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from planc.fileio import atomic_write

    try:
        atomic_write(path, text)
    except IsADirectoryError:
        raise usage_error(f"cannot write {path}: is a directory") from None
    except OSError as exc:
        raise usage_error(f"cannot write {path}: {exc.strerror or exc}") from None

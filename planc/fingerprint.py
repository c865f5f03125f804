"""The plan's fingerprint: its identity, which every target, checkpoint and report shows.

    >>> import planc
    >>> from planc.fingerprint import fingerprint
    >>> a = planc.loads("mesh(batch = auto)  data_parallel")
    >>> b = planc.loads("mesh(batch = auto)    data_parallel  # the same plan")
    >>> fingerprint(a.ir) == fingerprint(b.ir) == a.fingerprint
    True
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json

from planc.diagnostics import Span
from planc.ir import Check, PlanIR

__all__ = ["fingerprint", "bound_fingerprint"]

# Fields that say where a plan came from, not what it means.
_NOT_MEANING = {"file", "sources", "diagnostics", "layout_span", "rename_span", "span"}
# Fields added after fingerprints were first published: left out while empty, so a plan
# that does not use them keeps the fingerprint it always had.
_LEFT_OUT_EMPTY = {"renames", "axis_types", "peak", "state", "state_default", "host", "step",
                   "logical_axes", "names", "stages", "imbalance"}


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

"""`check` conditions: what a condition reads, and the diagnostic when it fails.

A condition is evaluated once every size it reads is known: at check time, or when a
device count binds `auto` (`planc.check.binding`).
"""

from __future__ import annotations

from planc.check.expression import evaluate
from planc.diagnostics import error
from planc.ir import Check, Mesh


def sizes_env(params: dict, mesh: Mesh) -> dict[str, int]:
    """Names a `check` can read: integer params and the mesh axes whose size is known."""
    env = {k: v for k, v in params.items() if isinstance(v, int)}
    for a in mesh.axes:
        if a.global_size is not None:
            env[a.name] = a.global_size
    return env


def evaluate_check(check: Check, env: dict[str, int], devices: int | None = None):
    """None when `check` holds under `env`, else the P118/P122 diagnostic."""
    try:
        ok = evaluate(check.expr, env)
    except ZeroDivisionError as exc:
        return error("P122", f"`check` divides by zero: {exc}", check.span, label="in this check",
                     devices=devices)
    except OverflowError as exc:
        return error("P122", f"`check` arithmetic overflows: {exc}", check.span,
                     label="in this check", devices=devices,
                     help="a check compares sizes and counts; none is near 2**256")
    if ok:
        return None
    values = ", ".join(f"{n} = {env[n]}" for n in check.names)
    return error("P118", f"check failed: {check.message}", check.span,
                 label=f"false with {values}" if values else "false", devices=devices)

"""`check` conditions: evaluation over parameters and axis sizes, and comparison keys.

A condition is the AST expression the checker has name-checked; it is evaluated once
every size it reads is known (at check time, or when a device count binds `auto`).
"""

from __future__ import annotations

from planc.syntax import ast
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
        ok = _eval(check.expr, env)
    except ZeroDivisionError as exc:
        return error("P122", f"`check` divides by zero: {exc}", check.span, label="in this check",
                     devices=devices)
    if ok:
        return None
    values = ", ".join(f"{n} = {env[n]}" for n in check.names)
    return error("P118", f"check failed: {check.message}", check.span,
                 label=f"false with {values}" if values else "false", devices=devices)


def _eval(node, env):
    if isinstance(node, ast.IntLit):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.text]
    if isinstance(node, ast.Paren):
        return _eval(node.inner, env)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        return (not v) if node.op == "not" else -v
    op = node.op
    if op == "and":
        return _eval(node.left, env) and _eval(node.right, env)
    if op == "or":
        return _eval(node.left, env) or _eval(node.right, env)
    a, b = _eval(node.left, env), _eval(node.right, env)
    if op == "**":
        raise ZeroDivisionError("`**` is not supported")
    return {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
        "//": lambda: a // b, "%": lambda: a % b, "==": lambda: a == b,
        "!=": lambda: a != b, "<": lambda: a < b, "<=": lambda: a <= b,
        ">": lambda: a > b, ">=": lambda: a >= b,
    }[op]()


def expr_key(node) -> tuple:
    """The expression as nested tuples without spans: what two plans compare."""
    if isinstance(node, ast.IntLit):
        return ("int", node.value)
    if isinstance(node, ast.Name):
        return ("name", node.text)
    if isinstance(node, ast.Paren):
        return expr_key(node.inner)
    if isinstance(node, ast.UnaryOp):
        return (node.op, expr_key(node.operand))
    return (node.op, expr_key(node.left), expr_key(node.right))


def names_in(expr):
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name):
            yield node
        elif isinstance(node, ast.BinOp):
            stack += [node.right, node.left]
        elif isinstance(node, ast.UnaryOp):
            stack.append(node.operand)
        elif isinstance(node, ast.Paren):
            stack.append(node.inner)

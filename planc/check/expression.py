"""A `check` expression as data, and the one evaluator of it.

The checker encodes the expression it has name-checked as nested tuples without spans:

    ("int", 8)  ("name", "model")  ("unary", "-", X)  ("binary", "%", X, Y)
    ("group", 1)   (a stage rule's `\\1`, read from the environment as "\\1")

`/` divides to the floor, as `//` does: stage expressions write `\\1 / 8`; a `check`
refuses it (P163), where `//` says the same without a reader wondering.

That encoding is what the IR holds, what two plans compare, and what `planc compile`
writes into its modules. `_eval` is the evaluator of both: planc calls it, and the
emitted modules carry a copy of its source (they run where planc is not installed), so
it uses nothing but builtins and keeps the name it has there.
"""

from __future__ import annotations

from planc.syntax import ast


def encode(node) -> tuple:
    """The AST expression `node` in the encoding above.

    >>> from planc.syntax.ast import BinOp, IntLit, Name
    >>> encode(BinOp(None, "%", Name(None, "heads"), IntLit(None, 2)))
    ('binary', '%', ('name', 'heads'), ('int', 2))
    """
    if isinstance(node, ast.IntLit):
        return ("int", node.value)
    if isinstance(node, ast.Name):
        return ("name", node.text)
    if isinstance(node, ast.GroupRef):
        return ("group", node.number)
    if isinstance(node, ast.Paren):
        return encode(node.inner)
    if isinstance(node, ast.UnaryOp):
        return ("unary", node.op, encode(node.operand))
    if isinstance(node, ast.BinOp):
        return ("binary", node.op, encode(node.left), encode(node.right))
    raise TypeError(f"unexpected expression node {type(node).__name__}")


def nodes_in(node):
    """Every node of an AST expression, the root first, each before the nodes to its
    right (the order of the text)."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.BinOp):
            stack += [node.right, node.left]
        elif isinstance(node, ast.UnaryOp):
            stack.append(node.operand)
        elif isinstance(node, ast.Paren):
            stack.append(node.inner)


def names_in(node):
    """Every `Name` node an AST expression reads, left to right (with its span, for
    diagnostics)."""
    return (n for n in nodes_in(node) if isinstance(n, ast.Name))


def evaluate(expr: tuple, env: dict[str, int]):
    """The value of encoded `expr` with the names in `env`; ZeroDivisionError for `/ 0`,
    `% 0` and `**`, OverflowError for a value beyond 2**256.

    >>> evaluate(("binary", "%", ("name", "heads"), ("int", 2)), {"heads": 8})
    0
    """
    return _eval(expr, env)


def _eval(node, env):
    kind = node[0]
    if kind == "int":
        return node[1]
    if kind == "name":
        return env[node[1]]
    if kind == "group":
        return env["\\" + str(node[1])]
    if kind == "unary":
        value = _eval(node[2], env)
        return (not value) if node[1] == "not" else -value
    op = node[1]
    if op == "and":
        return _eval(node[2], env) and _eval(node[3], env)
    if op == "or":
        return _eval(node[2], env) or _eval(node[3], env)
    a, b = _eval(node[2], env), _eval(node[3], env)
    if op == "**":
        raise ZeroDivisionError("`**` is not supported")
    value = {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
        "//": lambda: a // b, "/": lambda: a // b, "%": lambda: a % b, "==": lambda: a == b,
        "!=": lambda: a != b, "<": lambda: a < b, "<=": lambda: a <= b,
        ">": lambda: a > b, ">=": lambda: a >= b,
    }[op]()
    # Every value stays within 256 bits, so a product of two is cheap: without a bound,
    # a long chain of `*` over 30-digit parameters grows numbers of millions of digits.
    if not -(1 << 256) < value < (1 << 256):
        raise OverflowError("a value of the expression is beyond 2**256")
    return value

"""Formatting a plan without changing its meaning: the canonical printer, held to its word.

`format_text` prints the plan with `planc.syntax.printer`, then checks its own work
before returning: the printed text must parse to the same tree and keep every comment,
and check to the same `PlanIR` as the original (or, for a plan with checker errors,
just parse to the same tree). Otherwise it raises `FormatterBug` instead of returning
text that means something else. When the full canonical order would change the IR (or
cannot be verified), statements keep their side of every include.
"""

from __future__ import annotations

import re
from collections import Counter

from planc.check.checker import check
from planc.diagnostics import PlanError, Span
from planc.syntax import ast
from planc.syntax.parser import parse
from planc.syntax.printer import canonical_order, canonical_text, include_safe_order


class FormatterBug(Exception):
    """The formatter produced text that does not mean what the input meant (a planc bug)."""


def format_text(text: str, file: str = "<string>") -> str:
    """`text` in canonical layout; raises `PlanError` if `text` has a syntax error.

    A plan that parses but has checker errors (an unknown axis, say) is still formatted.
    `file` names the plan for diagnostics and for resolving `include` paths.

    >>> print(format_text('mesh(batch=auto)  data_parallel # dp\\n'), end="")
    mesh(batch = auto)
    <BLANKLINE>
    data_parallel  # dp
    """
    parse(text, file)  # syntax errors are reported against the text exactly as given
    norm = text.replace("\r\n", "\n").replace("\r", "\n")
    module = parse(norm, file)
    try:
        original_ir = check(text, file)
    except PlanError:
        original_ir = None

    statements = list(module.statements)
    has_includes = any(isinstance(s, ast.IncludeStmt) for s in statements)
    orders = []
    if original_ir is not None or not has_includes:
        orders.append(canonical_order(statements))
    if has_includes:
        orders.append(include_safe_order(statements))

    problem = ""
    for order in orders:
        out = canonical_text(module, norm, order)
        _verify_tree(module, order, out, file)
        if original_ir is None:
            return out
        try:
            new_ir = check(out, file)
        except PlanError as exc:
            problem = f"produced text that no longer checks: {exc.diagnostics[0].message}"
            continue
        if without_spans(new_ir) == without_spans(original_ir):
            return out
        problem = "would change what the plan means"
    raise FormatterBug(f"formatting {file} {problem}")


def without_spans(obj):
    """What an AST node or IR object says, as comparable tuples, leaving out where it
    stands (its spans). `16GiB` and `16 GiB` are one size, `10 %` and `10%` one share."""
    if isinstance(obj, Span):
        return None
    if isinstance(obj, (ast.SizeLit, ast.DurationLit, ast.PercentLit)):
        return (type(obj).__name__, obj.value, re.sub(r"[ \t]", "", obj.text))
    if hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type):
        import dataclasses  # the records' own `fields` view; loaded on first use

        return (type(obj).__name__,) + tuple(
            (f.name, without_spans(getattr(obj, f.name)))
            for f in dataclasses.fields(obj) if f.compare and f.name != "span")
    if isinstance(obj, (tuple, list)):
        return tuple(without_spans(x) for x in obj)
    if isinstance(obj, dict):
        return tuple((k, without_spans(v)) for k, v in obj.items())
    return obj


def _verify_tree(module: ast.Module, order, out: str, file: str) -> None:
    """Raise `FormatterBug` unless `out` parses to `order`'s statements and keeps the
    comments of `module`."""
    try:
        again = parse(out, file)
    except PlanError as exc:
        raise FormatterBug(f"formatting {file} produced text that does not parse: "
                           f"{exc.diagnostics[0].message}") from None
    if without_spans(tuple(again.statements)) != without_spans(tuple(order)):
        raise FormatterBug(f"formatting {file} changed its syntax tree")
    before = Counter(c.text for c in module.comments)
    after = Counter(c.text for c in again.comments)
    if before != after:
        lost = ", ".join(repr(t) for t in (before - after)) or "none"
        added = ", ".join(repr(t) for t in (after - before)) or "none"
        raise FormatterBug(f"formatting {file} did not keep its comments as they were "
                           f"(lost: {lost}; added: {added})")

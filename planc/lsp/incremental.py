"""Reparsing only what a change touched: the rules of one `layout`, `state` or `outputs`
block.

An editor changes a plan a keystroke at a time, nearly always inside one rule of a large
block; parsing the whole text again is most of the time a check takes. `reparse` finds
the lines a change touched, widens them to whole rules, parses just those rules and puts
them in place of the old ones in the last module. Whenever that is not plainly the same
as parsing the whole text, it declines (returns None) and the caller parses in full: a
change that adds or removes lines, touches anything but the rules of one block, or does
not parse on its own. tests/lsp/test_lsp_incremental.py checks the two agree.

Line breaks are token boundaries in the language (no token spans lines) and a block's
rules are a plain sequence, so complete rules parsed alone read as they do in place.
"""

from __future__ import annotations

import dataclasses

from planc.diagnostics import PlanError, Span
from planc.syntax import ast, parse

_SECTIONS = (ast.LayoutSection, ast.StateSection, ast.OutputsSection)


def reparse(old_text: str, old: ast.Module, new_text: str) -> ast.Module | None:
    """The module of `new_text`, from `old` (the module of `old_text`), or None.

    >>> from planc.syntax import parse
    >>> a = 'mesh(batch = 2)\\nmodel_parallel\\nlayout {\\n  "x" -> (batch,)\\n}\\n'
    >>> b = a.replace("(batch,)", "(_, batch)")
    >>> reparse(a, parse(a, "p.kd"), b) == parse(b, "p.kd")
    True
    """
    old_lines, new_lines = old_text.split("\n"), new_text.split("\n")
    if len(old_lines) != len(new_lines) or old_text == new_text:
        return None
    first = next(i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b) + 1
    last = len(old_lines) - next(i for i, (a, b) in enumerate(
        zip(reversed(old_lines), reversed(new_lines))) if a != b)
    found = _section_of(old, first, last)
    if found is None:
        return None
    index, section = found
    lo, hi = first, last
    for rule in section.rules:  # widen to the whole rules the change touches
        if rule.span.line <= hi and rule.span.end_line >= lo:
            lo, hi = min(lo, rule.span.line), max(hi, rule.span.end_line)
    if not section.span.line < lo <= hi < section.span.end_line:
        return None
    wrapped = "layout {\n" + "\n".join(new_lines[lo - 1:hi]) + "\n}\n"
    try:
        part = parse(wrapped, old.file)
    except PlanError:
        return None
    if len(part.statements) != 1 or not isinstance(part.statements[0], ast.LayoutSection):
        return None
    rules = tuple(_shifted(r, lo - 2) for r in part.statements[0].rules)
    before = tuple(r for r in section.rules if r.span.end_line < lo)
    after = tuple(r for r in section.rules if r.span.line > hi)
    if len(before) + len(after) + sum(1 for r in section.rules
                                      if r.span.line <= hi and r.span.end_line >= lo) \
            != len(section.rules):
        return None
    new_section = dataclasses.replace(section, rules=before + rules + after)
    statements = old.statements[:index] + (new_section,) + old.statements[index + 1:]
    comments = tuple(c for c in old.comments if not lo <= c.span.line <= hi) + tuple(
        _shifted(c, lo - 2) for c in part.comments)
    comments = tuple(sorted(comments, key=lambda c: (c.span.line, c.span.column)))
    return dataclasses.replace(old, statements=statements, comments=comments)


def _section_of(module: ast.Module, first: int, last: int):
    """(index, section) of the rules block holding lines `first`..`last`, or None."""
    for i, stmt in enumerate(module.statements):
        if stmt.span.line <= first and last <= stmt.span.end_line:
            return (i, stmt) if isinstance(stmt, _SECTIONS) else None
    return None


def _shifted(node, lines: int):
    """`node` with every span in it `lines` lines further down."""
    if isinstance(node, Span):
        return Span(node.file, node.line + lines, node.column, node.end_line + lines,
                    node.end_column)
    if isinstance(node, tuple):
        return tuple(_shifted(n, lines) for n in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {f.name: _shifted(getattr(node, f.name), lines)
                   for f in dataclasses.fields(node)}
        return dataclasses.replace(node, **changes)
    return node

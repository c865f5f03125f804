"""P135: a plan's strings and comments hold only characters a reviewer can see.

A right-to-left override (U+202E) makes a line read in another order than it is
matched; a zero-width space or a no-break space makes two patterns that look alike
match different paths. A plan is reviewed as text, so each string and comment that holds
a character `planc.diagnostics.text.hidden` names gets a warning at its first such
character; inside a pattern it can be written as an escape (`\\u202e`) instead.
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, warning
from planc.diagnostics.text import has_hidden, hidden
from planc.syntax import ast

__all__ = ["hidden_text"]


def hidden_text(module: ast.Module, text: str) -> list[Diagnostic]:
    """One P135 for each string and comment of `module` (parsed from `text`) that holds
    a character that is not plainly visible."""
    # Line breaks and tabs are a plan's own; most plans hold no other hidden character,
    # and are not walked.
    if not has_hidden(text, allowed="\n\t"):
        return []
    out = []
    for node in _strings_and_comments(module):
        raw, start, what = ((node.raw, node.value_offset, "string")
                            if isinstance(node, ast.StrLit) else (node.text, 0, "comment"))
        at = next((i for i, c in enumerate(raw) if hidden(c)), None)
        if at is not None:
            out.append(_warning(node, raw, at, start, what))
    return out


def _warning(node, raw: str, at: int, start: int, what: str) -> Diagnostic:
    import unicodedata

    ch = raw[at]
    code = f"U+{ord(ch):04X}"
    name = unicodedata.name(ch, "")
    more = sum(1 for c in raw[at + 1:] if hidden(c))
    also = f" (and {more} more)" if more else ""
    escape = ch.encode("unicode_escape").decode()
    fix = (f"remove it; in a pattern, `{escape}` matches it and shows what it is"
           if what == "string" else "remove it")
    return warning("P135", f"{what} holds {code}{f' {name}' if name else ''}{also}, which is "
                   f"not plainly visible: the line does not read as what it is",
                   node.span.shifted(start + at, 1), label="here", help=fix)


def _strings_and_comments(module: ast.Module):
    stack = list(reversed(module.statements))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.StrLit):
            yield node
            continue
        if isinstance(node, tuple):
            stack.extend(reversed(node))
            continue
        for name in _fields(type(node)):
            value = getattr(node, name, None)
            if isinstance(value, (ast.Node, tuple)):
                stack.append(value)
    yield from module.comments


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    if cls not in _FIELDS:
        _FIELDS[cls] = tuple(n for k in cls.__mro__ for n in getattr(k, "__slots__", ())
                             if n != "span")
    return _FIELDS[cls]

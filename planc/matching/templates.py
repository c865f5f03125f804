r"""Rename templates: the text a checkpoint name becomes, with `\1` and `\g<name>` in it.

A template is literal text with group references: `\N` (group N, one or two digits, as
Python's `re` reads them), `\g<N>` and `\g<name>`, `\g<0>` (the whole name), and `\\`
for a backslash. Nothing else follows a backslash: Python's escapes (`\n`, `\t`, octal)
have no use in a variable path, and a template that might mean two things is refused
rather than guessed. The checker and the renamer read a template with the same
`compile_template`, so what `planc lint` accepts is exactly what `plan.load` expands.

>>> import re
>>> pieces = compile_template(r"layers/\1/\g<kind>/kernel", re.compile(r"l\.(\d+)\.(?P<kind>\w+)"))
>>> expand(pieces, re.fullmatch(r"l\.(\d+)\.(?P<kind>\w+)", "l.3.q"))
'layers/3/q/kernel'
>>> try:
...     compile_template(r"x/\3", re.compile(r"(a)(b)"))
... except TemplateProblem as problem:
...     print(problem.offset, problem.message)
2 `\3` names group 3, but the pattern has 2 groups
"""

from __future__ import annotations

import re
import warnings

from planc.frozen import Frozen
from planc.matching.python_re import sre_parse

__all__ = ["Groups", "TemplateProblem", "compile_template", "expand", "pattern_groups"]

# A piece is literal text (str) or a group number (int).
Pieces = tuple


class TemplateProblem(Exception):
    """Why a template cannot be expanded for a pattern; `offset` and `length` locate the
    fault in the template's text."""

    def __init__(self, message: str, offset: int, length: int) -> None:
        super().__init__(message)
        self.message, self.offset, self.length = message, offset, length


class Groups(Frozen):
    """What a template may name in a pattern: `groups` (how many) and `groupindex` (named
    groups -> numbers), as a compiled `re.Pattern` has them."""

    groups: int
    groupindex: dict


def pattern_groups(pattern: str) -> Groups:
    """The groups of a pattern (one `check_pattern` accepts), read by Python's parser
    without compiling it, which costs three times as much for a plan of many rules.

    >>> pattern_groups(r"(?P<layer>\\d+)\\.(q|k)")
    Groups(groups=2, groupindex={'layer': 1})
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FutureWarning "possible nested set" and the like
        state = sre_parse.parse(pattern).state
    return Groups(state.groups - 1, dict(state.groupdict))


_REFERENCE = re.compile(r"\\(?:(\d\d?)|g<([^<>]*)>|(\\)|(g)|(.)|$)", re.DOTALL)


def compile_template(template: str, regex: "re.Pattern | Groups") -> Pieces:
    """`template` as pieces for matches of `regex` (a compiled pattern, or its `Groups`),
    or `TemplateProblem`: a reference to a group `regex` lacks, a malformed `\\g<...>`,
    an unknown escape, or an empty template."""
    if not template:
        raise TemplateProblem("the template is empty: it must give the variable's path", 0, 0)
    pieces: list = []
    text_start = 0
    for m in _REFERENCE.finditer(template):
        if m.start() > text_start:
            pieces.append(template[text_start:m.start()])
        text_start = m.end()
        where, length = m.start(), m.end() - m.start()
        number, name, backslash, bare_g, other = m.groups()
        if backslash:
            pieces.append("\\")
        elif number is not None:
            pieces.append(_group_number(number, m.group(), regex, where, length))
        elif name is not None:
            if name.isdigit():
                pieces.append(_group_number(name, m.group(), regex, where, length))
            elif name.isidentifier() and name in regex.groupindex:
                pieces.append(regex.groupindex[name])
            elif name.isidentifier():
                named = ", ".join(f"`{n}`" for n in regex.groupindex) or "none"
                raise TemplateProblem(f"`{m.group()}` names group `{name}`, but the pattern "
                                      f"has no such group (named groups: {named})",
                                      where, length)
            else:
                raise TemplateProblem(f"`{m.group()}` is not a group name or number",
                                      where, length)
        elif bare_g:
            raise TemplateProblem(r"`\g` must be followed by `<name>` or `<number>`",
                                  where, length)
        elif other is not None:
            raise TemplateProblem(f"unknown escape `{m.group()}` in a template (write `\\\\` "
                                  "for a backslash)", where, length)
        else:
            raise TemplateProblem("a template cannot end with a single backslash "
                                  "(write `\\\\` for a backslash)", where, max(length, 1))
    if text_start < len(template):
        pieces.append(template[text_start:])
    return _merged(pieces)


def _group_number(digits: str, written: str, regex: re.Pattern, where: int,
                  length: int) -> int:
    n = int(digits)
    if written.startswith("\\0") or (n == 0 and not written.startswith("\\g")):
        raise TemplateProblem(f"`{written}` is not a group reference: groups count from 1 "
                              r"(`\g<0>` is the whole name)", where, length)
    if n > regex.groups:
        have = f"{regex.groups} group" + ("" if regex.groups == 1 else "s")
        raise TemplateProblem(f"`{written}` names group {n}, but the pattern has {have}",
                              where, length)
    return n


def _merged(pieces: list) -> Pieces:
    """Adjacent literal pieces joined, so expansion joins as few strings as possible."""
    out: list = []
    for p in pieces:
        if type(p) is str and out and type(out[-1]) is str:
            out[-1] += p
        else:
            out.append(p)
    return tuple(out)


def expand(pieces: Pieces, match: re.Match) -> str:
    """The text of `pieces` for `match`; a group that took no part in the match gives ""
    (as Python's `re` does since 3.5)."""
    group = match.group
    return "".join(p if type(p) is str else (group(p) or "") for p in pieces)

r"""Writing a pattern's parse tree (Python's ``re`` parser's) as RE2 text.

Every character position (a literal, ``.``, a set, ``\d``-style escapes) becomes an
explicit RE2 class of code points: the ASCII ones are those Python's ``re`` itself
matches under the pattern's flags, and the non-ASCII ones are decided as under
``re.ASCII`` (see the package's character policy), so RE2's own ideas of ``\s``, ``\d``,
``\w`` or case folding never enter. Groups become ``(?:...)`` (nothing here captures),
anchors RE2's ``\A \z \b \B`` and ``(?m:^)``/``(?m:$)``. A backtracking construct raises
``_Unsupported``, naming it.
"""

from __future__ import annotations

import functools
import re

from planc.matching.python_re import sre


class _Unsupported(Exception):
    """A construct RE2 has no equivalent for; ``feature`` names it (a key of the
    translation's table of refusals)."""

    def __init__(self, feature: str) -> None:
        super().__init__(feature)
        self.feature = feature


_LITERAL = sre.LITERAL
_NOTHING = r"[^\x00-\x{10ffff}]"  # the RE2 class no character is in
_CHAR_OPS = (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN)
_FLAGS_THAT_SHAPE_CHARACTERS = sre.SRE_FLAG_IGNORECASE | sre.SRE_FLAG_ASCII | sre.SRE_FLAG_DOTALL


def _emit(items, flags: int) -> str:
    """The RE2 text for the parse items ``items`` under the regex flags ``flags``."""
    if flags & sre.SRE_FLAG_IGNORECASE:
        return "".join(_emit_item(op, value, flags) for op, value in items)
    # Literal characters are most of a pattern; without IGNORECASE an ASCII one's set
    # is itself whatever the other flags, so its text is looked up, not worked out.
    ascii_literal = _ASCII_LITERAL_TEXT
    return "".join(ascii_literal[value] if op is _LITERAL and value < 128
                   else _emit_item(op, value, flags) for op, value in items)


def _emit_item(op, value, flags: int) -> str:
    if op in _CHAR_OPS:
        if op is sre.IN:
            value = tuple(value)
        return _char_class(op, value, flags & _FLAGS_THAT_SHAPE_CHARACTERS)
    if op is sre.AT:
        return _anchor(value, flags)
    if op is sre.BRANCH:
        return "(?:" + "|".join(_emit(branch, flags) for branch in value[1]) + ")"
    if op is sre.SUBPATTERN:
        _group, add_flags, del_flags, body = value
        return "(?:" + _emit(body, (flags | add_flags) & ~del_flags) + ")"
    if op is sre.MAX_REPEAT or op is sre.MIN_REPEAT:  # greed cannot change yes/no
        low, high, body = value
        return "(?:" + _emit(body, flags) + ")" + _quantifier(low, high)
    if op is sre.GROUPREF:
        raise _Unsupported("backreference")
    if op is sre.GROUPREF_EXISTS:
        raise _Unsupported("conditional")
    if op is sre.ASSERT or op is sre.ASSERT_NOT:
        raise _Unsupported("lookahead" if value[0] == 1 else "lookbehind")
    if op is getattr(sre, "ATOMIC_GROUP", None):
        raise _Unsupported("atomic")
    if op is getattr(sre, "POSSESSIVE_REPEAT", None):
        raise _Unsupported("possessive")
    raise AssertionError(f"unexpected regex operation {op}")  # a Python we do not know


def _quantifier(low: int, high: int) -> str:
    if high == sre.MAXREPEAT:
        return {0: "*", 1: "+"}.get(low, f"{{{low},}}")
    if low == high:
        return f"{{{low}}}"
    return "?" if (low, high) == (0, 1) else f"{{{low},{high}}}"


def _anchor(at, flags: int) -> str:
    multiline = flags & sre.SRE_FLAG_MULTILINE
    if at is sre.AT_BEGINNING:
        return "(?m:^)" if multiline else r"\A"
    if at is sre.AT_END:
        return "(?m:$)" if multiline else r"\z"
    return {sre.AT_BEGINNING_STRING: r"\A", sre.AT_END_STRING: r"\z",
            sre.AT_BOUNDARY: r"\b", sre.AT_NON_BOUNDARY: r"\B"}[at]


_MAX_CHAR = 0x10FFFF
_CATEGORY_TEXT = {
    sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_NOT_DIGIT: r"\D",
    sre.CATEGORY_SPACE: r"\s", sre.CATEGORY_NOT_SPACE: r"\S",
    sre.CATEGORY_WORD: r"\w", sre.CATEGORY_NOT_WORD: r"\W",
}
_NEGATED_CATEGORIES = {sre.CATEGORY_NOT_DIGIT, sre.CATEGORY_NOT_SPACE, sre.CATEGORY_NOT_WORD}


@functools.lru_cache(maxsize=None)
def _char_class(op, value, flags: int) -> str:
    """One character position as an explicit RE2 class (the package's character policy)."""
    ranges = _merge([(c, c) for c in _ascii_members(op, value, flags)]
                    + _non_ascii_ranges(op, value))
    if not ranges:
        return _NOTHING
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        char = chr(ranges[0][0])
        return char if char.isascii() and (char.isalnum() or char == "_") else _hex(ranges[0][0])
    if len(ranges) == 2 and all(lo == hi for lo, hi in ranges):
        # Two characters as an alternation, not a class: RE2 reads a class such as [Kk]
        # as "k, any case", and where it meets another branch (`a|[Kk]`) it widens it to
        # the whole Unicode case orbit, so U+212A KELVIN SIGN would match.
        return f"(?:{_hex(ranges[0][0])}|{_hex(ranges[1][0])})"
    return "[" + "".join(_hex(lo) if lo == hi else f"{_hex(lo)}-{_hex(hi)}"
                         for lo, hi in ranges) + "]"


def _ascii_members(op, value, flags: int) -> list[int]:
    """The ASCII characters this position matches, as Python's re decides."""
    if op is sre.ANY:
        return [c for c in range(128) if c != 10 or flags & sre.SRE_FLAG_DOTALL]
    if op is sre.LITERAL and not flags & sre.SRE_FLAG_IGNORECASE:
        return [value] if value < 128 else []
    if op is sre.LITERAL:
        text = _py_char(value)
    elif op is sre.NOT_LITERAL:
        text = "[^" + _py_char(value) + "]"
    else:
        parts = []
        for kind, item in value:
            if kind is sre.NEGATE:
                parts.append("^")
            elif kind is sre.LITERAL:
                parts.append(_py_char(item))
            elif kind is sre.RANGE:
                parts.append(_py_char(item[0]) + "-" + _py_char(item[1]))
            else:
                parts.append(_CATEGORY_TEXT[item])
        text = "[" + "".join(parts) + "]"
    prefix = ("i" if flags & sre.SRE_FLAG_IGNORECASE else "") + \
             ("a" if flags & sre.SRE_FLAG_ASCII else "")
    probe = re.compile(f"(?{prefix}){text}" if prefix else text)
    return [c for c in range(128) if probe.fullmatch(chr(c))]


def _non_ascii_ranges(op, value) -> list[tuple[int, int]]:
    """The non-ASCII code points this position matches, as under re.ASCII."""
    if op is sre.ANY:
        return [(128, _MAX_CHAR)]
    if op is sre.LITERAL:
        return [(value, value)] if value >= 128 else []
    if op is sre.NOT_LITERAL:
        return _complement([(value, value)] if value >= 128 else [])
    negate, ranges = False, []
    for kind, item in value:
        if kind is sre.NEGATE:
            negate = True
        elif kind is sre.LITERAL and item >= 128:
            ranges.append((item, item))
        elif kind is sre.RANGE and item[1] >= 128:
            ranges.append((max(item[0], 128), item[1]))
        elif kind is sre.CATEGORY and item in _NEGATED_CATEGORIES:
            ranges.append((128, _MAX_CHAR))
    return _complement(ranges) if negate else _merge(ranges)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    gaps, next_free = [], 128
    for lo, hi in _merge(ranges):
        if lo > next_free:
            gaps.append((next_free, lo - 1))
        next_free = hi + 1
    if next_free <= _MAX_CHAR:
        gaps.append((next_free, _MAX_CHAR))
    return gaps


def _hex(code: int) -> str:
    return rf"\x{{{code:x}}}"


def _py_char(code: int) -> str:
    return rf"\U{code:08x}"


# What each ASCII literal is without IGNORECASE, looked up rather than worked out; and the
# same for ``str.translate``, leaving out the characters that stand for themselves.
_ASCII_LITERAL_TEXT = tuple(_char_class(sre.LITERAL, code, 0) for code in range(128))
_ASCII_LITERAL_TRANSLATION = {code: text for code, text in enumerate(_ASCII_LITERAL_TEXT)
                              if text != chr(code)}

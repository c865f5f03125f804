r"""A reader of simple patterns that does without Python's ``re`` parser.

Most rule patterns are simple: literal text, ``.``, ``\d``-style escapes, character
sets, groups, ``|`` and ``* + ?``. ``_simple_tree`` reads those itself, several times
faster than Python's parser and into the very tree that parser would build (the test
suite holds the two equal), and ``_emit_simple`` writes that tree as RE2 text. Anything
else (flags, counted repeats, other escapes, any error) is left to the full translation.
"""

from __future__ import annotations

import functools
import re

from planc.matching.python_re import sre, sre_parse
from planc.matching.re2_text import (_ASCII_LITERAL_TEXT, _ASCII_LITERAL_TRANSLATION,
                                     _char_class, _emit_item, _quantifier)


class _Seq(list):
    """A sequence of parse items that, like Python's SubPattern, equals only itself.

    Python's parser moves a prefix shared by every alternative of a ``|`` out of the
    alternation, comparing items with ``==``; a group's or a repeat's body is a
    SubPattern there, which compares by identity, so ours must too.
    """

    __slots__ = ()
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__


# A run of two or more ASCII characters that Python's parser would make one LITERAL item
# each: ``(_RUN, "kernel")``. Only ``_emit_simple`` and the alternation see runs, and the
# alternation splits a run's first character off before comparing it, so they behave as
# those LITERAL items would.
_RUN = object()
_SIMPLE_FLAGS = sre.SRE_FLAG_UNICODE  # what Python's parser sets on a str pattern
_MAX_SIMPLE_NESTING = 20
_SPECIAL = frozenset(".\\[{()*+?^$|")  # Python's SPECIAL_CHARS
# A run of ASCII characters that are not special, each listed: written as "neither
# special nor \x80-\U0010ffff", the class took re ~2 ms to compile at every import.
_ASCII_RUN = re.compile("[" + "".join(re.escape(chr(c)) for c in range(128)
                                      if chr(c) not in _SPECIAL) + "]+")
_SET_EXTENT = re.compile(r"\[\^?\]?(?:[^\]\\]|\\.)*\]", re.DOTALL)  # as _parse ends a set
_LITERAL = sre.LITERAL
_AT = sre.AT
_IN = sre.IN
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None))
_QUANTIFIERS = {"*": (0, sre.MAXREPEAT), "+": (1, sre.MAXREPEAT), "?": (0, 1)}
_NON_CAPTURING = (None, 0, 0)
_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


class _NotSimple(Exception):
    pass


def _simple_tree(pattern: str):
    r"""The items Python's parser makes of ``pattern``, or None if it is not simple.

    Simple: no flags, no ``{``, no backslash escape but ``\d \D \s \S \w \W``, ``\A \Z
    \b \B``, ``\n``-style control escapes and an escaped non-alphanumeric character, and
    no ``(?`` but ``(?:``; and valid, since errors are the full path's to report. The
    items are those of ``re._parser.parse(pattern)``, with runs of ASCII characters
    folded (``_RUN``); the test suite holds the translations equal.
    """
    if "{" in pattern:
        return None
    reader = _SimpleReader(pattern)
    try:
        items = reader.alternation(0)
    except _NotSimple:
        return None
    if reader.pos != len(pattern):  # an unbalanced `)`
        return None
    return items


class _SimpleReader:
    """``re._parser._parse_sub`` and ``_parse``, for simple patterns only."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.pos = 0
        self.groups = 1  # group 0 is the whole match

    def alternation(self, nested: int) -> _Seq:
        pattern = self.pattern
        items = [self.sequence(nested)]
        while pattern.startswith("|", self.pos):
            self.pos += 1
            items.append(self.sequence(nested))
        if len(items) == 1:
            return items[0]
        sub = _Seq()
        while True:  # move a prefix every alternative shares out of the alternation
            prefix = None
            for item in items:
                if not item:
                    break
                if item[0][0] is _RUN:
                    _split_first(item)
                if prefix is None:
                    prefix = item[0]
                elif item[0] != prefix:
                    break
            else:
                for item in items:
                    del item[0]
                sub.append(prefix)
                continue
            break
        members = []  # alternatives of one character each make one character set
        for item in items:
            if len(item) != 1:
                break
            op, value = item[0]
            if op is _LITERAL:
                members.append((op, value))
            elif op is _IN and value[0][0] is not sre.NEGATE:
                members.extend(value)
            else:  # a _RUN too: it stands for two items or more
                break
        else:
            sub.append((_IN, list(dict.fromkeys(members))))
            return sub
        sub.append((sre.BRANCH, (None, items)))
        return sub

    def sequence(self, nested: int) -> _Seq:
        pattern, n = self.pattern, len(self.pattern)
        items = _Seq()
        append = items.append
        pos = self.pos
        dissolve = False
        while pos < n:
            char = pattern[pos]
            if char not in _SPECIAL:
                run = _ASCII_RUN.match(pattern, pos)
                if run is None:  # a non-ASCII character
                    append((_LITERAL, ord(char)))
                    pos += 1
                    continue
                end = run.end()
                if end < n and pattern[end] in "*+?":
                    end -= 1  # the quantifier takes the last character alone
                if end - pos > 1:
                    append((_RUN, pattern[pos:end]))
                elif end > pos:
                    append((_LITERAL, ord(char)))
                if end == run.end() - 1:
                    append((_LITERAL, ord(pattern[end])))
                pos = run.end()
                continue
            if char == "|" or char == ")":
                break
            pos += 1
            if char == "\\":
                if pos >= n:
                    raise _NotSimple
                escape = pattern[pos - 1:pos + 1]
                pos += 1
                code = sre_parse.CATEGORIES.get(escape) or sre_parse.ESCAPES.get(escape)
                if code is None:
                    if escape[1] in _ASCII_ALNUM:
                        raise _NotSimple
                    code = (_LITERAL, ord(escape[1]))
                append(code)
            elif char == "[":
                extent = _SET_EXTENT.match(pattern, pos - 1)
                if extent is None:
                    raise _NotSimple  # not closed
                append(_simple_set(extent.group()))
                pos = extent.end()
            elif char == ".":
                append((sre.ANY, None))
            elif char in _QUANTIFIERS:
                low, high = _QUANTIFIERS[char]
                if not items or items[-1][0] is _AT or items[-1][0] in _REPEATS:
                    raise _NotSimple  # nothing to repeat, or a multiple repeat
                body = _Seq(items[-1:])
                if body[0][0] is sre.SUBPATTERN and body[0][1][:3] == _NON_CAPTURING:
                    body = body[0][1][3]
                op = sre.MAX_REPEAT
                if pattern.startswith("?", pos):
                    op = sre.MIN_REPEAT
                    pos += 1
                elif pattern.startswith("+", pos):
                    raise _NotSimple  # possessive
                items[-1] = (op, (low, high, body))
            elif char == "(":
                group = None
                if pattern.startswith("?", pos):
                    if not pattern.startswith(":", pos + 1):
                        raise _NotSimple
                    pos += 2
                else:
                    group = self.groups
                    self.groups += 1
                if nested >= _MAX_SIMPLE_NESTING:
                    raise _NotSimple
                self.pos = pos
                body = self.alternation(nested + 1)
                if not pattern.startswith(")", self.pos):
                    raise _NotSimple
                pos = self.pos + 1
                append((sre.SUBPATTERN, (group, 0, 0, body)))
                dissolve = dissolve or group is None
            elif char == "^":
                append((_AT, sre.AT_BEGINNING))
            elif char == "$":
                append((_AT, sre.AT_END))
            else:  # `{`, refused before reading
                raise _NotSimple
        self.pos = pos
        if dissolve:  # non-capturing groups dissolve into the sequence
            for i in range(len(items) - 1, -1, -1):
                op, value = items[i]
                if op is sre.SUBPATTERN and value[:3] == _NON_CAPTURING:
                    items[i:i + 1] = value[3]
        return items


def _split_first(item: _Seq) -> None:
    """Turn the run that starts ``item`` into a LITERAL item and the rest of the run."""
    run = item[0][1]
    rest = (_RUN, run[1:]) if len(run) > 2 else (_LITERAL, ord(run[1]))
    item[0:1] = [(_LITERAL, ord(run[0])), rest]


@functools.lru_cache(maxsize=1024)
def _simple_set(text: str):
    """The item for the set ``text`` (``[...]``, as ``_SET_EXTENT`` finds it)."""
    n = len(text)
    pos = 1
    negate = text.startswith("^", pos)
    if negate:
        pos += 1
    members: list = []
    while True:
        if pos >= n:
            raise _NotSimple  # cannot happen: _SET_EXTENT ends where _parse does
        this = text[pos]
        if this == "\\":
            first = _simple_set_escape(text[pos:pos + 2])
            pos += 2
        else:
            pos += 1
            if this == "]" and members:
                break
            first = (_LITERAL, ord(this))
        if text.startswith("-", pos):
            pos += 1
            that = text[pos:pos + 1]
            if that == "]":
                pos += 1
                if first[0] is _IN:
                    first = first[1][0]
                members.append(first)
                members.append((_LITERAL, ord("-")))
                break
            if that == "\\":
                last = _simple_set_escape(text[pos:pos + 2])
                pos += 2
            elif that:
                last = (_LITERAL, ord(that))
                pos += 1
            else:
                raise _NotSimple
            if first[0] is not _LITERAL or last[0] is not _LITERAL or last[1] < first[1]:
                raise _NotSimple  # a bad range
            members.append((sre.RANGE, (first[1], last[1])))
        else:
            if first[0] is _IN:
                first = first[1][0]
            members.append(first)
    if pos != n:
        raise _NotSimple  # cannot happen, as above
    members = list(dict.fromkeys(members))
    if len(members) == 1 and members[0][0] is _LITERAL:
        return (sre.NOT_LITERAL, members[0][1]) if negate else members[0]
    if negate:
        members.insert(0, (sre.NEGATE, None))
    return (_IN, _Members(members))


class _Members(list):
    """A set's members, as Python's parser lists them, with their RE2 text.

    Equal to a plain list of the same members, as the alternation's prefix test needs.
    """

    __slots__ = ("text",)

    def __init__(self, members: list) -> None:
        super().__init__(members)
        self.text = _char_class(_IN, tuple(members), 0)


def _emit_simple(items) -> str:
    """``_emit(items, _SIMPLE_FLAGS)`` for a simple tree, which may hold runs."""
    ascii_literal, translation = _ASCII_LITERAL_TEXT, _ASCII_LITERAL_TRANSLATION
    out = []
    append = out.append
    for op, value in items:
        if op is _RUN:
            append(value.translate(translation))
        elif op is _LITERAL and value < 128:
            append(ascii_literal[value])
        elif op is _IN and type(value) is _Members:
            append(value.text)
        elif op is sre.BRANCH:
            append("(?:" + "|".join(map(_emit_simple, value[1])) + ")")
        elif op is sre.SUBPATTERN:
            append("(?:" + _emit_simple(value[3]) + ")")
        elif op is sre.MAX_REPEAT or op is sre.MIN_REPEAT:
            append("(?:" + _emit_simple(value[2]) + ")" + _quantifier(value[0], value[1]))
        else:
            append(_emit_item(op, value, _SIMPLE_FLAGS))
    return "".join(out)


def _simple_set_escape(escape: str):
    code = sre_parse.ESCAPES.get(escape)
    if code is not None:
        return code
    code = sre_parse.CATEGORIES.get(escape)
    if code is not None and code[0] is _IN:
        return code
    if len(escape) < 2 or escape[1] in _ASCII_ALNUM:
        raise _NotSimple
    return (_LITERAL, ord(escape[1]))

r"""planc's one matching engine: which rule patterns match a variable path.

Patterns are written in Python ``re`` syntax (Keras matches ``LayoutMap`` keys with
``re.fullmatch`` since 3.14 and ``re.search`` before) but run on RE2, so matching takes
time linear in the path whatever the pattern, and every pattern is tried in one pass.

>>> m = Matcher([r"dense_\d+/kernel", r".*kernel", "dense_1/kernel"], mode="full")
>>> m.match("dense_1/kernel")
(0, 1, 2)
>>> m.literal("dense_1/kernel")
2
>>> problem = check_pattern(r"(\w+)/\1")
>>> problem.kind, problem.offset
('unsupported', 6)

How a pattern reaches RE2: Python's own parser reads it (so it means exactly what
``re`` makes of it: ``\Z``, ``a{,3}``, ``(?x)``, ``(?P<name>...)``, inline flags) and the
parse tree is written back in RE2 syntax. Every character class, literal and ``.`` is
written out as an explicit set of code points, with the ASCII part decided by Python's
``re`` itself, so RE2's own ideas of ``\s``, ``\d``, ``\w`` or case folding never
enter. Backtracking constructs (backreferences, lookaround, atomic groups, possessive
quantifiers, conditionals) have no RE2 equivalent and are refused by ``check_pattern``.
Most rule patterns are simple (literal text, sets, groups, ``|``, ``* + ?``); those are
read by a small reader of our own into the tree Python's parser would build, several
times faster, and each translation is cached for the ``Matcher`` that follows.

Character policy:

* On a path made of ASCII characters, ``Matcher`` answers exactly as Python's ``re``
  (``re.fullmatch`` for mode "full", ``re.search`` for mode "search"), including
  ``\s`` matching ``\x1c``-``\x1f`` and ``(?i)ı`` matching ``i``.
* A non-ASCII character in a path is matched as under Python's ``re.ASCII`` flag:
  ``\d``, ``\w``, ``\s`` never count it as a digit, word or space character, ``\b``
  treats it as a non-word character, and ``(?i)`` does not fold its case. Python's
  default ``re`` is Unicode-aware there (``\w`` matches ``é``), so Keras may disagree
  on such paths; variable paths are ASCII in practice.
* Line breaks: Python's ``$`` (without ``(?m)``) also matches just before a final
  ``\n``; here it matches only at the very end. Variable paths have no line breaks.
* ``\B`` on the empty path follows the running Python (no match before 3.14).
"""

from __future__ import annotations

import functools
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import re2

try:  # Python >= 3.11
    from re import _constants as _sre
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre
    import sre_parse as _sre_parse

__all__ = ["Matcher", "PatternProblem", "check_pattern"]


@dataclass(frozen=True)
class PatternProblem:
    """Why a pattern cannot be used.

    ``kind`` is "invalid" (Python's ``re`` rejects it: a syntax error) or "unsupported"
    (valid Python, but RE2 cannot run it in linear time, or at all). ``offset`` is an
    index into the pattern string where the problem is.
    """

    kind: str
    offset: int
    message: str


def check_pattern(pattern: str) -> PatternProblem | None:
    """Return what is wrong with ``pattern`` for a ``Matcher``, or None if nothing is."""
    if not isinstance(pattern, str):
        raise TypeError(f"a pattern must be a string, not {type(pattern).__name__}")
    try:
        _translate(pattern)
    except _Refused as refused:
        return refused.problem
    return None


class Matcher:
    """All of a rule list's patterns, compiled together for one-pass matching.

    ``mode`` is "full" (the whole path must match, as ``re.fullmatch``) or "search"
    (anywhere in the path, as ``re.search``). Patterns must pass ``check_pattern``;
    one that does not raises ValueError.
    """

    def __init__(self, patterns: Sequence[str], mode: str = "full") -> None:
        if mode not in ("full", "search"):
            raise ValueError(f'match mode must be "full" or "search", not {mode!r}')
        self.patterns = tuple(patterns)
        self.mode = mode
        texts = []
        for index, pattern in enumerate(self.patterns):
            problem = check_pattern(pattern)
            if problem is not None:
                raise ValueError(
                    f"pattern {index} ({pattern!r}) is {problem.kind} at offset "
                    f"{problem.offset}: {problem.message}")
            texts.append(_translate(pattern))
        self._literals: dict[str, int] = {}
        for index, pattern in enumerate(self.patterns):
            self._literals.setdefault(pattern, index)
        self._groups = _compile_groups(texts, 0, mode) if texts else []
        # RE2's \B matches the empty text; Python's did not before 3.14.
        self._on_empty = None
        if sys.version_info < (3, 14) and any(r"\B" in text for text in texts):
            self._on_empty = tuple(
                index for index, text in enumerate(texts)
                if _compile_one(text.replace(r"\B", _NOTHING), mode)("") is not None)

    def match(self, path: str) -> tuple[int, ...]:
        """Indices of every pattern that matches ``path``, ascending."""
        if not path and self._on_empty is not None:
            return self._on_empty
        groups = self._groups
        if len(groups) == 1:
            return groups[0].match(path)
        # Groups hold consecutive index ranges, in order, so this stays ascending.
        return tuple(index for group in groups for index in group.match(path))

    def match_many(self, paths: Iterable[str]) -> list[tuple[int, ...]]:
        """``[self.match(p) for p in paths]``, matching each distinct path once."""
        seen: dict[str, tuple[int, ...]] = {}
        match = self.match
        out = []
        for path in paths:
            hits = seen.get(path)
            if hits is None:
                hits = seen[path] = match(path)
            out.append(hits)
        return out

    def literal(self, path: str) -> int | None:
        """Index of the first pattern whose text equals ``path`` (a Keras exact key)."""
        return self._literals.get(path)

    def __repr__(self) -> str:
        return f"Matcher({len(self.patterns)} patterns, mode={self.mode!r})"


# ---------------------------------------------------------------------------- RE2 sets

def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.log_errors = False  # failures are reported as PatternProblems instead
    return options


_MAX_MEM = 64 << 20
_NOTHING = r"[^\x00-\x{10ffff}]"
# When its DFA runs out of memory RE2::Set::Match returns no matches at all, not an
# error. This pattern always matches, so an answer without it is such a failure. (RE2
# tries the DFA at Compile, where a failure splits the set, so this is a safety net.)
_SENTINEL = r"(?s:.*)"


def _compile_one(text: str, mode: str):
    regex = re2.compile(text, _options())
    return regex.fullmatch if mode == "full" else regex.search


class _Group:
    """Patterns ``start .. start+len(texts)-1`` in one RE2 set."""

    def __init__(self, texts: list[str], start: int, mode: str) -> None:
        options = _options()
        self._set = re2.Set.FullMatchSet(options) if mode == "full" else re2.Set.SearchSet(options)
        for text in texts:
            self._set.Add(text)
        self._sentinel = self._set.Add(_SENTINEL)
        self._set.Compile()
        self._match = self._set.Match
        self._texts, self._start, self._mode = texts, start, mode
        self._one_by_one = None

    def match(self, path: str) -> tuple[int, ...]:
        hits = self._match(path)
        if hits is not None:
            hits.sort()  # RE2 reports them in the order its DFA found them
            if hits[-1] == self._sentinel:
                hits.pop()
                if self._start:
                    return tuple(hit + self._start for hit in hits)
                return tuple(hits)
        # A lone RE2 regex falls back from the DFA to a linear-time NFA by itself.
        if self._one_by_one is None:
            self._one_by_one = [_compile_one(text, self._mode) for text in self._texts]
        return tuple(self._start + local for local, matches in enumerate(self._one_by_one)
                     if matches(path) is not None)


def _compile_groups(texts: list[str], start: int, mode: str) -> list[_Group]:
    try:
        return [_Group(texts, start, mode)]
    except re2.error:
        if len(texts) == 1:
            raise ValueError(f"pattern {start} is too large for RE2") from None
    half = len(texts) // 2
    return (_compile_groups(texts[:half], start, mode)
            + _compile_groups(texts[half:], start + half, mode))


# ------------------------------------------------------------- Python -> RE2 translation

class _Refused(Exception):
    def __init__(self, problem: PatternProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


_UNSUPPORTED = {
    "backreference": r"a backreference (\1 or (?P=name))",
    "lookahead": "a lookahead ((?=...) or (?!...))",
    "lookbehind": "a lookbehind ((?<=...) or (?<!...))",
    "conditional": "a conditional group ((?(1)...|...))",
    "atomic": "an atomic group ((?>...))",
    "possessive": "a possessive quantifier (*+, ++, ?+, {m,n}+)",
}
_WHY = ("planc matches paths with RE2, which guarantees linear-time matching and so "
        "has no backtracking constructs")


class _Unsupported(Exception):
    def __init__(self, feature: str) -> None:
        super().__init__(feature)
        self.feature = feature


@functools.lru_cache(maxsize=4096)
def _translate(pattern: str) -> str:
    r"""The RE2 text for a Python pattern; raises _Refused with the problem.

    Most rule patterns are literal text, ``.``, ``\d``-style escapes, character sets,
    groups, ``|`` and ``* + ?``; ``_simple_tree`` reads those itself, much faster than
    Python's parser and into the very tree it would build, and RE2 is known to accept
    what they translate to (see ``_re2_accepts``). Anything else takes the full path.
    """
    if _ASCII_RUN.fullmatch(pattern):  # plain text: each character stands for itself
        return pattern.translate(_ASCII_LITERAL_TRANSLATION)
    tree = _simple_tree(pattern)
    if tree is None:
        return _translate_fully(pattern)
    text = _emit_simple(tree)
    if not _re2_accepts(text):
        _check_with_re2(pattern, text)
    return text


def _translate_fully(pattern: str) -> str:
    """``_translate`` through Python's own parser, for any pattern."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FutureWarning "possible nested set" and the like
        try:
            # re.compile is this parse plus a code generator whose only refusal is a
            # look-behind of no fixed width: see the unsupported case below.
            tree = _sre_parse.parse(pattern)
        except re.error as error:
            raise _invalid(pattern, error) from None
        except (RecursionError, OverflowError) as error:
            raise _Refused(PatternProblem(
                "invalid", 0, f"Python's re cannot compile this pattern: {error}")) from None
    try:
        text = _emit(tree.data, tree.state.flags)
    except _Unsupported as unsupported:
        if "(?<" in pattern:
            # A look-behind that re.compile refuses (not fixed-width) is invalid, not
            # unsupported, wherever it is in the pattern.
            _compile_in_python(pattern)
        feature = unsupported.feature
        raise _Refused(PatternProblem(
            "unsupported", _locate(pattern, feature),
            f"{_UNSUPPORTED[feature]} is not supported: {_WHY}")) from None
    _check_with_re2(pattern, text)
    return text


def _compile_in_python(pattern: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            re.compile(pattern)
        except re.error as error:
            raise _invalid(pattern, error) from None
        except (RecursionError, OverflowError) as error:
            raise _Refused(PatternProblem(
                "invalid", 0, f"Python's re cannot compile this pattern: {error}")) from None


def _invalid(pattern: str, error: re.error) -> _Refused:
    offset = error.pos
    if offset is None:
        offset = _locate(pattern, "lookbehind") if "look-behind" in error.msg else 0
    return _Refused(PatternProblem("invalid", offset, error.msg))


def _check_with_re2(pattern: str, text: str) -> None:
    try:
        re2.compile(text, _options())
    except re2.error as error:
        reason = error.args[0] if error.args else str(error)
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        fragment = reason.rpartition(": ")[2]
        offset = pattern.find(fragment) if fragment else -1
        if offset < 0:
            offset = _locate(pattern, "repetition") if "repetition" in reason else 0
        hint = (" (RE2 allows at most 1000 repetitions, nested counts multiplied)"
                if "repetition" in reason else "")
        raise _Refused(PatternProblem(
            "unsupported", offset, f"RE2 cannot run this pattern: {reason}{hint}")) from None


# What a simple pattern translates to is RE2 syntax of a few kinds only: explicit sets
# of code points (``[\x{30}-\x{39}]``), ASCII letters and digits, ``(?:...)``, ``|``,
# ``* + ?`` and the anchors ``\A \z \b \B``. RE2 refuses none of that; it could only run
# out of memory or of nesting depth (1,000), and these bounds keep both far away: the
# heaviest kinds of set at this length compile within 1 MiB of RE2's 64 (the test suite
# holds them to it). Counted repetitions, the one construct RE2 limits, never occur.
_RE2_SURE_LENGTH = 20_000
_RE2_SURE_GROUPS = 200


def _re2_accepts(text: str) -> bool:
    return len(text) <= _RE2_SURE_LENGTH and text.count("(") <= _RE2_SURE_GROUPS


# ------------------------------------------------------------ the simple-pattern reader

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
_SIMPLE_FLAGS = _sre.SRE_FLAG_UNICODE  # what Python's parser sets on a str pattern
_MAX_SIMPLE_NESTING = 20
_SPECIAL = frozenset(".\\[{()*+?^$|")  # Python's SPECIAL_CHARS
_ASCII_RUN = re.compile(r"[^.\\\[{()*+?^$|\x80-\U0010ffff]+")
_SET_EXTENT = re.compile(r"\[\^?\]?(?:[^\]\\]|\\.)*\]", re.DOTALL)  # as _parse ends a set
_LITERAL = _sre.LITERAL
_AT = _sre.AT
_IN = _sre.IN
_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None))
_QUANTIFIERS = {"*": (0, _sre.MAXREPEAT), "+": (1, _sre.MAXREPEAT), "?": (0, 1)}
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
            elif op is _IN and value[0][0] is not _sre.NEGATE:
                members.extend(value)
            else:  # a _RUN too: it stands for two items or more
                break
        else:
            sub.append((_IN, list(dict.fromkeys(members))))
            return sub
        sub.append((_sre.BRANCH, (None, items)))
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
                code = _sre_parse.CATEGORIES.get(escape) or _sre_parse.ESCAPES.get(escape)
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
                append((_sre.ANY, None))
            elif char in _QUANTIFIERS:
                low, high = _QUANTIFIERS[char]
                if not items or items[-1][0] is _AT or items[-1][0] in _REPEATS:
                    raise _NotSimple  # nothing to repeat, or a multiple repeat
                body = _Seq(items[-1:])
                if body[0][0] is _sre.SUBPATTERN and body[0][1][:3] == _NON_CAPTURING:
                    body = body[0][1][3]
                op = _sre.MAX_REPEAT
                if pattern.startswith("?", pos):
                    op = _sre.MIN_REPEAT
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
                append((_sre.SUBPATTERN, (group, 0, 0, body)))
                dissolve = dissolve or group is None
            elif char == "^":
                append((_AT, _sre.AT_BEGINNING))
            elif char == "$":
                append((_AT, _sre.AT_END))
            else:  # `{`, refused before reading
                raise _NotSimple
        self.pos = pos
        if dissolve:  # non-capturing groups dissolve into the sequence
            for i in range(len(items) - 1, -1, -1):
                op, value = items[i]
                if op is _sre.SUBPATTERN and value[:3] == _NON_CAPTURING:
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
            members.append((_sre.RANGE, (first[1], last[1])))
        else:
            if first[0] is _IN:
                first = first[1][0]
            members.append(first)
    if pos != n:
        raise _NotSimple  # cannot happen, as above
    members = list(dict.fromkeys(members))
    if len(members) == 1 and members[0][0] is _LITERAL:
        return (_sre.NOT_LITERAL, members[0][1]) if negate else members[0]
    if negate:
        members.insert(0, (_sre.NEGATE, None))
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
        elif op is _sre.BRANCH:
            append("(?:" + "|".join(map(_emit_simple, value[1])) + ")")
        elif op is _sre.SUBPATTERN:
            append("(?:" + _emit_simple(value[3]) + ")")
        elif op is _sre.MAX_REPEAT or op is _sre.MIN_REPEAT:
            append("(?:" + _emit_simple(value[2]) + ")" + _quantifier(value[0], value[1]))
        else:
            append(_emit_item(op, value, _SIMPLE_FLAGS))
    return "".join(out)


def _simple_set_escape(escape: str):
    code = _sre_parse.ESCAPES.get(escape)
    if code is not None:
        return code
    code = _sre_parse.CATEGORIES.get(escape)
    if code is not None and code[0] is _IN:
        return code
    if len(escape) < 2 or escape[1] in _ASCII_ALNUM:
        raise _NotSimple
    return (_LITERAL, ord(escape[1]))


_CHAR_OPS = (_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN)
_FLAGS_THAT_SHAPE_CHARACTERS = _sre.SRE_FLAG_IGNORECASE | _sre.SRE_FLAG_ASCII | _sre.SRE_FLAG_DOTALL


def _emit(items, flags: int) -> str:
    if flags & _sre.SRE_FLAG_IGNORECASE:
        return "".join(_emit_item(op, value, flags) for op, value in items)
    # Literal characters are most of a pattern; without IGNORECASE an ASCII one's set
    # is itself whatever the other flags, so its text is looked up, not worked out.
    ascii_literal = _ASCII_LITERAL_TEXT
    return "".join(ascii_literal[value] if op is _LITERAL and value < 128
                   else _emit_item(op, value, flags) for op, value in items)


def _emit_item(op, value, flags: int) -> str:
    if op in _CHAR_OPS:
        if op is _sre.IN:
            value = tuple(value)
        return _char_class(op, value, flags & _FLAGS_THAT_SHAPE_CHARACTERS)
    if op is _sre.AT:
        return _anchor(value, flags)
    if op is _sre.BRANCH:
        return "(?:" + "|".join(_emit(branch, flags) for branch in value[1]) + ")"
    if op is _sre.SUBPATTERN:
        _group, add_flags, del_flags, body = value
        return "(?:" + _emit(body, (flags | add_flags) & ~del_flags) + ")"
    if op is _sre.MAX_REPEAT or op is _sre.MIN_REPEAT:  # greed cannot change yes/no
        low, high, body = value
        return "(?:" + _emit(body, flags) + ")" + _quantifier(low, high)
    if op is _sre.GROUPREF:
        raise _Unsupported("backreference")
    if op is _sre.GROUPREF_EXISTS:
        raise _Unsupported("conditional")
    if op is _sre.ASSERT or op is _sre.ASSERT_NOT:
        raise _Unsupported("lookahead" if value[0] == 1 else "lookbehind")
    if op is getattr(_sre, "ATOMIC_GROUP", None):
        raise _Unsupported("atomic")
    if op is getattr(_sre, "POSSESSIVE_REPEAT", None):
        raise _Unsupported("possessive")
    raise AssertionError(f"unexpected regex operation {op}")  # a Python we do not know


def _quantifier(low: int, high: int) -> str:
    if high == _sre.MAXREPEAT:
        return {0: "*", 1: "+"}.get(low, f"{{{low},}}")
    if low == high:
        return f"{{{low}}}"
    return "?" if (low, high) == (0, 1) else f"{{{low},{high}}}"


def _anchor(at, flags: int) -> str:
    multiline = flags & _sre.SRE_FLAG_MULTILINE
    if at is _sre.AT_BEGINNING:
        return "(?m:^)" if multiline else r"\A"
    if at is _sre.AT_END:
        return "(?m:$)" if multiline else r"\z"
    return {_sre.AT_BEGINNING_STRING: r"\A", _sre.AT_END_STRING: r"\z",
            _sre.AT_BOUNDARY: r"\b", _sre.AT_NON_BOUNDARY: r"\B"}[at]


_MAX_CHAR = 0x10FFFF
_CATEGORY_TEXT = {
    _sre.CATEGORY_DIGIT: r"\d", _sre.CATEGORY_NOT_DIGIT: r"\D",
    _sre.CATEGORY_SPACE: r"\s", _sre.CATEGORY_NOT_SPACE: r"\S",
    _sre.CATEGORY_WORD: r"\w", _sre.CATEGORY_NOT_WORD: r"\W",
}
_NEGATED_CATEGORIES = {_sre.CATEGORY_NOT_DIGIT, _sre.CATEGORY_NOT_SPACE, _sre.CATEGORY_NOT_WORD}


@functools.lru_cache(maxsize=None)
def _char_class(op, value, flags: int) -> str:
    """One character position as an explicit RE2 class (see the module's policy)."""
    ranges = _merge([(c, c) for c in _ascii_members(op, value, flags)]
                    + _non_ascii_ranges(op, value))
    if not ranges:
        return _NOTHING
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        char = chr(ranges[0][0])
        return char if char.isascii() and (char.isalnum() or char == "_") else _hex(ranges[0][0])
    return "[" + "".join(_hex(lo) if lo == hi else f"{_hex(lo)}-{_hex(hi)}"
                         for lo, hi in ranges) + "]"


def _ascii_members(op, value, flags: int) -> list[int]:
    """The ASCII characters this position matches, as Python's re decides."""
    if op is _sre.ANY:
        return [c for c in range(128) if c != 10 or flags & _sre.SRE_FLAG_DOTALL]
    if op is _sre.LITERAL and not flags & _sre.SRE_FLAG_IGNORECASE:
        return [value] if value < 128 else []
    if op is _sre.LITERAL:
        text = _py_char(value)
    elif op is _sre.NOT_LITERAL:
        text = "[^" + _py_char(value) + "]"
    else:
        parts = []
        for kind, item in value:
            if kind is _sre.NEGATE:
                parts.append("^")
            elif kind is _sre.LITERAL:
                parts.append(_py_char(item))
            elif kind is _sre.RANGE:
                parts.append(_py_char(item[0]) + "-" + _py_char(item[1]))
            else:
                parts.append(_CATEGORY_TEXT[item])
        text = "[" + "".join(parts) + "]"
    prefix = ("i" if flags & _sre.SRE_FLAG_IGNORECASE else "") + \
             ("a" if flags & _sre.SRE_FLAG_ASCII else "")
    probe = re.compile(f"(?{prefix}){text}" if prefix else text)
    return [c for c in range(128) if probe.fullmatch(chr(c))]


def _non_ascii_ranges(op, value) -> list[tuple[int, int]]:
    """The non-ASCII code points this position matches, as under re.ASCII."""
    if op is _sre.ANY:
        return [(128, _MAX_CHAR)]
    if op is _sre.LITERAL:
        return [(value, value)] if value >= 128 else []
    if op is _sre.NOT_LITERAL:
        return _complement([(value, value)] if value >= 128 else [])
    negate, ranges = False, []
    for kind, item in value:
        if kind is _sre.NEGATE:
            negate = True
        elif kind is _sre.LITERAL and item >= 128:
            ranges.append((item, item))
        elif kind is _sre.RANGE and item[1] >= 128:
            ranges.append((max(item[0], 128), item[1]))
        elif kind is _sre.CATEGORY and item in _NEGATED_CATEGORIES:
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


_ASCII_LITERAL_TEXT = tuple(_char_class(_sre.LITERAL, code, 0) for code in range(128))
_ASCII_LITERAL_TRANSLATION = {code: text for code, text in enumerate(_ASCII_LITERAL_TEXT)
                              if text != chr(code)}


# ----------------------------------------------------------------- finding a construct

_QUANTIFIER_BRACE = re.compile(r"\{\d*(?:,\d*)?\}")
_OCTAL_ESCAPE = re.compile(r"\\[0-7]{3}")


def _class_end(pattern: str, i: int) -> int:
    """The offset just past the character class that starts with the `[` at ``i``."""
    n = len(pattern)
    i += 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):  # a ']' first in a class is a literal
        i += 1
    while i < n and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def nesting_too_deep(pattern: str, limit: int) -> int | None:
    """Offset of the first `(` nested deeper than ``limit``, or None.

    Escapes and character classes are skipped as `re` reads them; anything else counted
    by mistake only makes the check stricter. Python's parser recurses once per group,
    so the checker refuses such patterns before they reach it.
    """
    if pattern.count("(") <= limit:  # the depth cannot exceed it
        return None
    depth, i, n = 0, 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(pattern, i)
            continue
        if c == "(":
            depth += 1
            if depth > limit:
                return i
        elif c == ")":
            depth = max(depth - 1, 0)
        i += 1
    return None


def _locate(pattern: str, feature: str) -> int:
    """Offset of the first occurrence of ``feature`` in ``pattern``, or 0.

    A plain scan that skips escapes and character classes, so ``\\(?=`` and ``[(?=]``
    are not taken for lookaheads.
    """
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\":
            if (feature == "backreference" and pattern[i + 1:i + 2] in set("123456789")
                    and not _OCTAL_ESCAPE.match(pattern, i)):
                return i
            i += 2
            continue
        if char == "[":
            i = _class_end(pattern, i)
            continue
        if char == "(" and pattern.startswith("?", i + 1):
            head = pattern[i + 2:i + 4]
            if (feature == "lookahead" and head[:1] in ("=", "!")
                    or feature == "lookbehind" and head in ("<=", "<!")
                    or feature == "atomic" and head[:1] == ">"
                    or feature == "conditional" and head[:1] == "("
                    or feature == "backreference" and head == "P="):
                return i
        quantifier_end = i
        if char == "{":
            brace = _QUANTIFIER_BRACE.match(pattern, i)
            quantifier_end = brace.end() - 1 if brace else -1
        elif char not in "*+?":
            quantifier_end = -1
        if (feature == "possessive" and quantifier_end >= 0
                and pattern.startswith("+", quantifier_end + 1)):
            return quantifier_end + 1
        if (feature == "repetition" and char == "{" and quantifier_end >= 0
                and any(int(count) > 1000 for count in re.findall(r"\d+", brace.group()))):
            return i
        i = quantifier_end + 1 if quantifier_end >= 0 else i + 1
    return 0

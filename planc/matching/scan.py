"""Finding constructs in a pattern's text: nesting depth, where a refused construct is,
named groups, end anchors.

Scans here read the text as ``re`` does only as far as they must: a backslash escapes
the next character, and a character class runs to its first unescaped ``]`` (one first
in the class, after an optional ``^``, is a literal).
"""

from __future__ import annotations

import re

from planc.matching.python_re import sre, sre_parse

__all__ = ["has_end_anchor", "has_top_level_bar", "nesting_too_deep", "without_named_groups"]

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


def without_named_groups(pattern: str) -> str:
    r"""``pattern`` with every named group ``(?P<name>...)`` made non-capturing ``(?:...)``.

    Group names clash once several patterns are combined into one regex; the patterns
    planc accepts have no backreferences, so no name is referred to and the pattern
    matches exactly the same paths.

    >>> without_named_groups(r"(?P<layer>dense)_\d+/[(?P<]")
    '(?:dense)_\\d+/[(?P<]'
    """
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            end = _class_end(pattern, i)
            out.append(pattern[i:end])
            i = end
            continue
        if pattern.startswith("(?P<", i):
            close = pattern.find(">", i)
            if close < 0:  # not a valid pattern: leave the rest as it is
                out.append(pattern[i:])
                break
            out.append("(?:")
            i = close + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def has_end_anchor(pattern: str) -> bool:
    r"""Whether ``pattern`` asserts the end of the text (``$``, ``\Z``) anywhere.

    Python's own parser reads the pattern, so a ``$`` that is escaped or inside a
    character class does not count; ``pattern`` must be valid (``re.error`` otherwise).

    >>> has_end_anchor("dense/(kernel|bias$)"), has_end_anchor(r"dense\$")
    (True, False)
    """

    def walk(items) -> bool:
        for op, value in items:
            if op is sre.AT and value in (sre.AT_END, sre.AT_END_STRING):
                return True
            if op is sre.BRANCH and any(walk(b) for b in value[1]):
                return True
            if op is sre.SUBPATTERN and walk(value[-1]):
                return True
            if op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and walk(value[2]):
                return True
        return False

    return walk(sre_parse.parse(pattern).data)


def has_top_level_bar(pattern: str) -> bool:
    """Whether `pattern` has a `|` outside every group and class: `a|b` does, `(a|b)`
    and `[|]` do not.

    >>> has_top_level_bar("a|b"), has_top_level_bar("(a|b)c"), has_top_level_bar("[|]")
    (True, False, False)
    """
    if "|" not in pattern:
        return False
    depth, in_class, body = 0, False, 0
    # Only escapes, brackets, parentheses and bars matter: the scan jumps between them.
    for m in _STRUCTURE.finditer(pattern):
        c, at = m.group()[0], m.start()
        if c == "\\":
            continue
        if in_class:
            in_class = c != "]" or at == body  # a `]` first in a class is literal
        elif c == "[":
            in_class = True
            body = at + 2 if pattern.startswith("^", at + 1) else at + 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            return True
    return False


_STRUCTURE = re.compile(r"\\.|[\[\]()|]", re.DOTALL)

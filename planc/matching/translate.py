r"""Python pattern -> RE2 text, and what is wrong with a pattern that has none.

A pattern reaches RE2 by one of three ways, fastest first: plain text (each character
stands for itself) is translated character by character; a simple pattern is read by
``simple_reader`` into the tree Python's parser would build; anything else is read by
Python's own parser, so that it means exactly what ``re`` makes of it (``\Z``,
``a{,3}``, ``(?x)``, ``(?P<name>...)``, inline flags). The tree is written as RE2 text
by ``re2_text``. Backtracking constructs (backreferences, lookaround, atomic groups,
possessive quantifiers, conditionals) have no RE2 equivalent and are refused, as is a
pattern RE2 will not compile (too many repetitions, too large); RE2's check is left out
only where it is known to accept the text (``_re2_accepts``). Each translation is
cached for the ``Matcher`` that follows its check.
"""

from __future__ import annotations

import functools
import re
import warnings

import re2

from planc import limits
from planc.frozen import Frozen
from planc.matching.python_re import sre, sre_parse
from planc.matching.re2_text import _ASCII_LITERAL_TRANSLATION, _emit, _Unsupported
from planc.matching.scan import _locate
from planc.matching.simple_reader import _ASCII_RUN, _emit_simple, _simple_tree

__all__ = ["PatternProblem", "check_pattern"]


class PatternProblem(Frozen):
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


def _options() -> re2.Options:
    """The RE2 options of every regex and set planc compiles."""
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.log_errors = False  # failures are reported as PatternProblems instead
    return options


_MAX_MEM = 64 << 20  # bytes RE2 may use for one regex or set


class _Refused(Exception):
    """A pattern cannot be used; ``problem`` says why."""

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


# Room for every pattern of the largest plan twice over (a language server holds the plan
# and its edited copy): a plan larger than an LRU cache would miss on every pattern
# each time it is checked again, as it cycles through the cache.
_CACHED_PATTERNS = 2 * limits.MAX_RULES


@functools.lru_cache(maxsize=_CACHED_PATTERNS)
def _translate(pattern: str) -> str:
    r"""The RE2 text for a Python pattern; raises _Refused with the problem.

    Most rule patterns are literal text, ``.``, ``\d``-style escapes, character sets,
    groups, ``|`` and ``* + ?``; ``_simple_tree`` reads those itself, much faster than
    Python's parser and into the very tree it would build, and RE2 is known to accept
    what they translate to (see ``_re2_accepts``). Anything else takes the full path.
    """
    if _ASCII_RUN.fullmatch(pattern):  # plain text: each character stands for itself
        return pattern.translate(_ASCII_LITERAL_TRANSLATION)
    if "(?" in pattern and "u" in pattern:
        _refuse_unicode_flag(pattern)
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
            tree = sre_parse.parse(pattern)
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


def _refuse_unicode_flag(pattern: str) -> None:
    """Refuse `(?u)` and `(?u:...)`: planc reads `\\w`, `\\d`, `\\s`, `\\b` and case as
    ASCII, in every target; a pattern asking for Unicode would be answered otherwise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = sre_parse.parse(pattern, re.ASCII)
        except (re.error, ValueError) as error:
            # A global `(?u)` fails in fix_flags (ValueError), a scoped one in the parser.
            message = getattr(error, "msg", None) or str(error)
            if "incompatible" not in message and "cannot turn on" not in message:
                return  # another problem, reported where the pattern is translated
            raise _Refused(PatternProblem(
                "unsupported", getattr(error, "pos", None) or 0,
                "the `u` (Unicode) flag is not supported: planc reads \\w, \\d, \\s, \\b "
                "and letter case as ASCII, in every target (drop the flag)")) from None
        except (RecursionError, OverflowError):
            return
    if _scoped_unicode(tree.data):
        raise _Refused(PatternProblem(
            "unsupported", _locate_flag(pattern),
            "the `u` (Unicode) flag is not supported: planc reads \\w, \\d, \\s, \\b "
            "and letter case as ASCII, in every target (drop the flag)"))


_REPEAT_OPS = tuple(getattr(sre, name) for name in ("MAX_REPEAT", "MIN_REPEAT",
                                                     "POSSESSIVE_REPEAT") if hasattr(sre, name))


def _scoped_unicode(items) -> bool:
    """Whether a parsed pattern holds a `(?u:...)` group, at any depth."""
    stack = [items]
    while stack:
        for op, av in stack.pop():
            if op is sre.SUBPATTERN:
                if av[1] & sre.SRE_FLAG_UNICODE:
                    return True
                stack.append(av[-1])
            elif op in _REPEAT_OPS:
                stack.append(av[2])
            elif op is sre.BRANCH:
                stack.extend(av[1])
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                stack.append(av[1])
            elif op is getattr(sre, "ATOMIC_GROUP", None):
                stack.append(av)
    return False


def _locate_flag(pattern: str) -> int:
    at = pattern.find("(?")
    while at >= 0:
        end = pattern.find(":", at)
        if end > at and "u" in pattern[at + 2:end]:
            return at
        at = pattern.find("(?", at + 2)
    return 0


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

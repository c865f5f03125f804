"""``Matcher``: a rule list's patterns compiled into RE2 sets, matched in one pass.

A set answers every pattern at once in time linear in the path. A set too large for
RE2's memory is split in two, recursively, at compile time; should one still run out
of memory while matching (RE2 then answers nothing at all), the sentinel pattern every
set holds shows it, and that group's patterns are matched one by one instead.
"""

from __future__ import annotations

import sys

import re2

from planc.matching.re2_text import _NOTHING
from planc.matching.translate import _options, _translate, check_pattern

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["Matcher"]


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
        # RE2 matches UTF-8 bytes, and an unanchored search may start between the two
        # bytes of a character, where `\B` holds (Python sees no such position). For
        # non-ASCII paths such patterns are matched as whole-path matches of `.*P.*`,
        # which only ever stand between characters.
        self._texts = texts
        self._between_bytes = mode == "search" and any(r"\B" in text for text in texts)
        self._whole_path_groups = None
        # RE2's \B matches the empty text; Python's did not before 3.14.
        self._on_empty = None
        if sys.version_info < (3, 14) and any(r"\B" in text for text in texts):
            self._on_empty = tuple(
                index for index, text in enumerate(texts)
                if _compile_one(text.replace(r"\B", _NOTHING), mode)("") is not None)
        if len(self._groups) == 1 and not self._between_bytes and self._on_empty is None:
            # The common case, on the hot path of every resolution: the one group answers
            # by itself, so the call skips this method's checks (it shadows `match`).
            self.match = self._groups[0].match
        # For callers that read RE2's own answer (a list, in no order, that holds the
        # sentinel index unless RE2 failed): (match of UTF-8 bytes, sentinel), or None
        # when `match` has more to do than that.
        self.raw = ((self._groups[0]._match, self._groups[0]._sentinel)
                    if "match" in self.__dict__ else None)

    def match(self, path: str) -> tuple[int, ...]:
        """Indices of every pattern that matches ``path``, ascending."""
        if not path and self._on_empty is not None:
            return self._on_empty
        groups = self._groups
        if self._between_bytes and not path.isascii():
            if self._whole_path_groups is None:
                self._whole_path_groups = _compile_groups(
                    [f"{_ANY}*?(?:{text}){_ANY}*" for text in self._texts], 0, "full")
            groups = self._whole_path_groups
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


# When its DFA runs out of memory RE2::Set::Match returns no matches at all, not an
# error. This pattern always matches, so an answer without it is such a failure. (RE2
# tries the DFA at Compile, where a failure splits the set, so this is a safety net.)
_SENTINEL = r"(?s:.*)"
_ANY = r"[\x{0}-\x{10ffff}]"  # one character, whatever it is


def _compile_one(text: str, mode: str):
    """The ``fullmatch`` or ``search`` (by ``mode``) of one RE2 regex for ``text``."""
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
        # The binding's own Set.Match takes UTF-8 bytes; its Python wrapper adds a call
        # and a function lookup per path, which is a third of the match at this size.
        self._match = self._set._set.Match
        self._texts, self._start, self._mode = texts, start, mode
        self._one_by_one = None

    def match(self, path: str) -> tuple[int, ...]:
        hits = self._match(path.encode())
        if hits:
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
    """Groups for ``texts`` (patterns ``start`` on), halved until RE2 compiles each."""
    try:
        return [_Group(texts, start, mode)]
    except re2.error:
        if len(texts) == 1:
            raise ValueError(f"pattern {start} is too large for RE2") from None
    half = len(texts) // 2
    return (_compile_groups(texts[:half], start, mode)
            + _compile_groups(texts[half:], start + half, mode))

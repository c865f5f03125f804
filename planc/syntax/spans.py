"""Spans in plan text: from a lark token, between two spans, between two offsets of the
text, at an offset of the text."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate, count
from operator import add

from planc.diagnostics import Span

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:  # lark's runtime is imported only where a text fails to parse
    from planc.syntax.grammar import Token


def token_span(file: str, t: Token) -> Span:
    """Where token `t` stands, as lark counts (1-based lines and columns)."""
    return Span(file, t.line, t.column, t.end_line, t.end_column)


def joined(a: Span, b: Span) -> Span:
    """From the start of `a` to the end of `b`."""
    return Span(a.file, a.line, a.column, b.end_line, b.end_column)


def line_col(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of character `offset` of `text`."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


class Lines:
    """Where each line of a text starts, so that offsets become spans as lark counts them.

    lark counts `\n` only; a span that ends just past a `\n` ends at column 1 of the
    next line.
    """

    __slots__ = ("file", "_starts")

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        lengths = text.split("\n")
        lengths.pop()
        # Line k + 1 starts after the k lines before it and their k newlines.
        self._starts = [0, *map(add, accumulate(map(len, lengths)), count(1))]

    def point(self, offset: int) -> tuple[int, int]:
        """The line and column of character `offset`."""
        line = bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1

    def span(self, start: int, end: int) -> Span:
        """The span of characters `start` to `end` (exclusive)."""
        starts = self._starts
        line = bisect_right(starts, start)
        end_line = line if line == len(starts) or end < starts[line] else bisect_right(starts, end)
        return Span(self.file, line, start - starts[line - 1] + 1, end_line,
                    end - starts[end_line - 1] + 1)

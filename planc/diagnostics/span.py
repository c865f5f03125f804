"""Where a diagnostic points: a region of a plan file."""

from __future__ import annotations

from planc.frozen import Frozen

class Span(Frozen):
    """A region of a source file; lines and columns count from 1, the end is exclusive.

    A `Frozen` record, as the AST nodes are: a parse makes several spans per rule.

    >>> Span("plan.kd", 3, 5, 3, 9).shifted(1, 2)
    Span(file='plan.kd', line=3, column=6, end_line=3, end_column=8)
    """

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def start_of(cls, file: str) -> "Span":
        """The file's first character: where a diagnostic about the whole file points
        when nothing in it is more to blame.

        >>> Span.start_of("plan.kd")
        Span(file='plan.kd', line=1, column=1, end_line=1, end_column=2)
        """
        return cls(file, 1, 1, 1, 2)

    def shifted(self, start: int, length: int) -> "Span":
        """A sub-span `length` characters long, `start` characters into a one-line span."""
        col = self.column + start
        return Span(self.file, self.line, col, self.line, col + max(length, 1))

"""Where a diagnostic points: a region of a plan file."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source file; lines and columns count from 1, the end is exclusive."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def shifted(self, start: int, length: int) -> "Span":
        """A sub-span `length` characters long, `start` characters into a one-line span."""
        col = self.column + start
        return Span(self.file, self.line, col, self.line, col + max(length, 1))

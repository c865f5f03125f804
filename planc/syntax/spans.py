"""Spans in plan text: from a lark token, between two spans, at an offset of the text."""

from __future__ import annotations

from lark import Token

from planc.diagnostics import Span


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

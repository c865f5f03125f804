"""The words of the plan language, read from its grammar: the one list that syntax errors,
the highlighter, the editor's completions and the names planc writes (`planc suggest`,
`planc import`) all use, so none of them can fall behind the language.

A terminal written `NAME: "word"` in grammar/planc.lark is reserved: lark's lexer reads
that word as the keyword wherever it stands, so it can name nothing (no axis, param or
plan). A terminal written `NAME.2: /word(?=LOOKAHEAD)/` is a keyword only where its
lookahead holds: `model` starts a statement only before a string, and stays free as a
name, as the usual name of a mesh axis must; `state` starts one only before a `{`, and
stays the budget's setting (`budget(state = 3)`).

>>> "layout" in RESERVED, "_" in RESERVED, "model" in RESERVED
(True, True, False)
>>> STATEMENT_KEYWORDS[:3], [word for word, _ in CONTEXTUAL]
(('plan', 'param', 'mesh'), ['state', 'stages', 'axes', 'model'])
"""

from __future__ import annotations

import re

from planc.syntax.grammar import grammar_text

_RESERVED = re.compile(r'^([A-Z_]+)(?:\.\d+)?:\s*"([a-z_]+)"\s*$', re.M)
_CONTEXTUAL = re.compile(r'^[A-Z_]+(?:\.\d+)?:\s*/([a-z_]+)(\(\?=[^/\n]*\))/\s*$', re.M)
# The first symbol of each `*_stmt` rule: the keyword a statement starts with.
_STATEMENT = re.compile(r"^\w+_stmt:\s*([A-Z_]+)", re.M)

_TEXT = grammar_text()
_WORD_OF = dict(_RESERVED.findall(_TEXT))  # terminal -> its word

# Every reserved word, in the grammar's order.
RESERVED: tuple[str, ...] = tuple(_WORD_OF.values())
# (word, lookahead) of each word that is a keyword only where its lookahead holds.
CONTEXTUAL: tuple[tuple[str, str], ...] = tuple(_CONTEXTUAL.findall(_TEXT))
# The reserved words a statement starts with, in the grammar's order.
STATEMENT_KEYWORDS: tuple[str, ...] = tuple(dict.fromkeys(
    _WORD_OF[t] for t in _STATEMENT.findall(_TEXT) if t in _WORD_OF))

__all__ = ["CONTEXTUAL", "RESERVED", "STATEMENT_KEYWORDS"]

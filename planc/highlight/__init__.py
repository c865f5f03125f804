"""Syntax highlighting of plans: a Pygments lexer (`pygmentize -l planc plan.kd`, and
Sphinx or MkDocs code blocks tagged `planc`), registered through the `pygments.lexers`
entry point of the `lsp` extra.

The keywords are the grammar's own (`planc.syntax.keywords`), so the lexer never falls
behind the language: a word the grammar reserves is a keyword here, and a word it treats
as a keyword only where its lookahead holds (`model "PATH"`, `state {`) is one only there.

>>> from pygments.token import Keyword, Name
>>> toks = [(t, v) for t, v in PlancLexer().get_tokens('mesh(model = 2)\\nmodel "m.json"\\n')]
>>> (Name.Variable, 'model') in toks, (Keyword, 'model') in toks
(True, True)
"""

from __future__ import annotations

import re

from pygments.lexer import RegexLexer, words
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String,
                            Whitespace)

from planc.syntax.keywords import CONTEXTUAL, RESERVED

CONSTANTS = ("replicated", "default", "auto", "_")
SIZE_UNITS = ("TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "KB", "B")


def _tokens() -> dict:
    plain = tuple(w for w in RESERVED if w not in CONSTANTS)
    return {"root": [
        (r"[ \t\f\r\n]+", Whitespace),
        (r"#[^\n\r]*", Comment.Single),
        (r'"(?:[^"\\\n\r]|\\[^\n\r])*"', String.Double),
        (r"[0-9]+(?:_[0-9]+)*[ \t]*(?:" + "|".join(SIZE_UNITS) + r")(?![A-Za-z0-9_])",
         Number),
        (r"[0-9]+(?:_[0-9]+)*(?:\.[0-9]+)?[ \t]*(?:us|ms|s)(?![A-Za-z0-9_])", Number),
        (r"[0-9]+(?:_[0-9]+)*(?![A-Za-z0-9_])", Number.Integer),
        *[(re.escape(w) + look, Keyword) for w, look in CONTEXTUAL],
        (words(plain, suffix=r"(?![A-Za-z0-9_])"), Keyword),
        (words(CONSTANTS, suffix=r"(?![A-Za-z0-9_])"), Keyword.Constant),
        (r"[A-Za-z_][A-Za-z0-9_]*", Name.Variable),
        (r"\.\.\.", Keyword.Constant),
        (r"->|==|!=|<=|>=|//|[<>+\-*%=|]", Operator),
        (r"[()\[\]{},]", Punctuation),
    ]}


class PlancLexer(RegexLexer):
    """Pygments lexer for planc sharding plans (`*.kd`)."""

    name = "planc"
    aliases = ["planc", "kd"]
    filenames = ["*.kd"]
    mimetypes = ["text/x-planc"]
    tokens = _tokens()


__all__ = ["PlancLexer"]

"""The grammar of plan text, read once per process, and the lark parsers built from it.

The grammar is `grammar/planc.lark`, shipped in the wheel as the `planc.grammar` package
and read through the package's resources. lark caches the LALR tables it derives on
disk (`cache=True`), so later processes load them instead of building them again.
"""

from __future__ import annotations

import functools
from importlib import resources

from lark import Lark


@functools.lru_cache(maxsize=1)
def grammar_text() -> str:
    """The text of `planc.lark`, read once per process."""
    return resources.files("planc.grammar").joinpath("planc.lark").read_text("utf-8")


def new_parser(**options) -> Lark:
    """A fresh LALR parser of the grammar; `options` are lark's (a `transformer`, ...).

    The basic lexer reads the text the same way in every parser state. lark's default
    contextual lexer leaves NAME out where no name can follow, so `planner` was read as
    `plan ner` and `overlapfirst` as `overlap first`.
    """
    return Lark(grammar_text(), parser="lalr", lexer="basic", maybe_placeholders=True,
                cache=True, **options)


@functools.lru_cache(maxsize=1)
def positioned_parser() -> Lark:
    """The process's parser that builds lark's own parse tree, with positions on its nodes.

    The AST is built without it (`planc.syntax.parser`); it answers what the parser
    would accept at a point of a text with a syntax error, and the tests compare spans
    and tokens with it.
    """
    return new_parser(propagate_positions=True)

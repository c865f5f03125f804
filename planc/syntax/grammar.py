"""The grammar of plan text, and its LALR parsers, from the one engine this process uses.

The grammar is `grammar/planc.lark`, shipped in the wheel as the `planc.grammar` package.
Its parsers come from `planc.syntax._lalr_standalone` when that module was generated
from this very text (lark's standalone tool, run by `make venv`: see
`planc.syntax.generate_parser`), else from lark itself, which caches the LALR tables it
derives on disk (`cache=True`). Both are lark's one lexer and LALR parser over this
grammar's tables, so they give the same trees, tokens and errors
(tests/syntax/test_parser_engines.py); the generated module exists because importing lark (its
grammar compiler, `regex`, interegular) and loading its tables took about a third of a
`planc lint`.

This module is the one place that decides. `Token`, `Transformer` and the exceptions
a parse raises are the chosen engine's classes, so what a parser returns or raises is an
instance of what the rest of `planc.syntax` tests for.
"""

from __future__ import annotations

import functools
import os
from importlib import import_module

# The options of every parser; `planc.syntax.generate_parser` writes the standalone
# module with the same ones (parser="lalr" is the standalone tool's only algorithm).
# The basic lexer reads the text the same way in every parser state. lark's default
# contextual lexer leaves NAME out where no name can follow, so `planner` was read as
# `plan ner` and `overlapfirst` as `overlap first`.
OPTIONS = {"parser": "lalr", "lexer": "basic", "maybe_placeholders": True}
GENERATED_MODULE = "planc.syntax._lalr_standalone"


def read_grammar() -> str:
    """The text of `planc.lark`, as `importlib.resources` reads it (newlines as `\\n`).

    Read through the package's loader, which serves files beside its modules in a
    directory or a zip alike: `importlib.resources` would add ~9 ms of imports to
    every start-up.
    """
    spec = import_module("planc.grammar").__spec__
    data = spec.loader.get_data(os.path.join(os.path.dirname(spec.origin), "planc.lark"))
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


_TEXT = read_grammar()


def grammar_text() -> str:
    """The text of `planc.lark`, read once per process."""
    return _TEXT


def generated_engine(text: str):
    """The generated module if it was generated from `text`, else None.

    Its stamp is the whole grammar text it was made from: any edit of `planc.lark`
    since makes it stale, and lark is used until `make venv` writes it again.
    """
    try:
        module = import_module(GENERATED_MODULE)
    except Exception:  # absent (ImportError), or damaged: lark parses all the same
        return None
    return module if getattr(module, "PLANC_GRAMMAR", None) == text else None


_GENERATED = generated_engine(_TEXT)
if _GENERATED is not None:
    ENGINE = "standalone"
    Lark = _GENERATED.Lark
    Token = _GENERATED.Token
    Transformer = _GENERATED.Transformer
    UnexpectedInput = _GENERATED.UnexpectedInput
    UnexpectedCharacters = _GENERATED.UnexpectedCharacters
    UnexpectedToken = _GENERATED.UnexpectedToken
else:
    ENGINE = "lark"
    from lark import Lark, Token, Transformer
    from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

__all__ = ["ENGINE", "Lark", "OPTIONS", "Token", "Transformer", "UnexpectedCharacters",
           "UnexpectedInput", "UnexpectedToken", "grammar_text", "new_parser",
           "positioned_parser"]


def new_parser(**options) -> Lark:
    """A fresh LALR parser of the grammar. `options` are those lark takes when it loads
    a parser it built before: `transformer`, `propagate_positions`, `lexer_callbacks`...
    """
    if _GENERATED is not None:
        return _GENERATED.Lark_StandAlone(**options)
    return Lark(_TEXT, cache=True, **OPTIONS, **options)


@functools.lru_cache(maxsize=1)
def positioned_parser() -> Lark:
    """The process's parser that builds lark's own parse tree, with positions on its nodes.

    The AST is built without it (`planc.syntax.parser`); it answers what the parser
    would accept at a point of a text with a syntax error, and the tests compare spans
    and tokens with it.
    """
    return new_parser(propagate_positions=True)

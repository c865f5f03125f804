"""The grammar of plan text, and its LALR parsers, from the engines this process uses.

The grammar is `grammar/planc.lark`, shipped in the wheel as the `planc.grammar` package.
Two modules are generated from it (by `make venv`, and into a wheel by its build: see
`planc.syntax.generate_parser`), each stamped with the very grammar text it was made
from and used only while that is this grammar's text:

- `planc.syntax._lalr_tables`, lark's lexer and LALR tables as plain data. A text that
  parses is parsed by `planc.syntax.lalr` from them (ENGINE "tables"), with no `import`
  of lark's runtime at all.
- `planc.syntax._lalr_standalone`, lark's standalone parser (its runtime with the same
  tables). Where it is absent or stale lark itself is used, which caches the LALR tables
  it derives on disk (`cache=True`).

Lark's side (`lark_engine()`: "standalone" or "lark") parses a text that does not parse,
so that its exception says why, and builds the trees and tokens the tools ask for. Its
classes (`Lark`, `Token`, `Transformer` and the exceptions a parse raises) are this
module's attributes, loaded the first time one is asked for. Both are lark's one lexer
and LALR parser over this grammar's tables, so they give the same trees, tokens and
errors (tests/syntax/test_parser_engines.py). Importing lark (its grammar compiler,
`regex`, interegular) and loading its tables took about a third of a `planc lint`, and
the standalone runtime alone most of what was left.
"""

from __future__ import annotations

import functools
import os

from planc.lazy import import_module


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


TABLES_MODULE = "planc.syntax._lalr_tables"


def generated_tables(text: str):
    """The generated tables module if it was generated from `text`, else None (stamped
    as the generated parser is)."""
    try:
        module = import_module(TABLES_MODULE)
    except Exception:  # absent, or damaged: lark's tables serve
        return None
    return module if getattr(module, "PLANC_GRAMMAR", None) == text else None


_TABLES = generated_tables(_TEXT)
_LARK_NAMES = ("Lark", "Token", "Transformer", "UnexpectedInput", "UnexpectedCharacters",
               "UnexpectedToken")
_LARK_ENGINE: str | None = None
_GENERATED = None


def _load_lark() -> str:
    """Chooses lark's side (the generated standalone parser, else lark) once, and makes
    its classes this module's."""
    global _LARK_ENGINE, _GENERATED
    if _LARK_ENGINE is None:
        _GENERATED = generated_engine(_TEXT)
        if _GENERATED is not None:
            found = {name: getattr(_GENERATED, name) for name in _LARK_NAMES}
            engine = "standalone"
        else:
            import lark
            import lark.exceptions

            found = {name: getattr(lark, name, None) or getattr(lark.exceptions, name)
                     for name in _LARK_NAMES}
            engine = "lark"
        globals().update(found)
        _LARK_ENGINE = engine
    return _LARK_ENGINE


def lark_engine() -> str:
    """Which of lark's parsers this process uses: "standalone" or "lark" (loading it)."""
    return _load_lark()


def tables():
    """The generated tables module, current with the grammar, or None."""
    return _TABLES


def __getattr__(name: str):
    if name in _LARK_NAMES:
        _load_lark()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The engine that parses a text that parses: "tables", or lark's side itself.
ENGINE = "tables" if _TABLES is not None else _load_lark()

__all__ = ["ENGINE", "Lark", "OPTIONS", "Token", "Transformer", "UnexpectedCharacters",
           "UnexpectedInput", "UnexpectedToken", "grammar_text", "lark_engine", "new_parser",
           "positioned_parser", "tables"]


def new_parser(**options):
    """A fresh LALR parser of the grammar. `options` are those lark takes when it loads
    a parser it built before: `transformer`, `propagate_positions`, `lexer_callbacks`...
    """
    if _load_lark() == "standalone":
        return _GENERATED.Lark_StandAlone(**options)
    return globals()["Lark"](_TEXT, cache=True, **OPTIONS, **options)


@functools.lru_cache(maxsize=1)
def positioned_parser():
    """The process's parser that builds lark's own parse tree, with positions on its nodes.

    The AST is built without it (`planc.syntax.parser`); it answers what the parser
    would accept at a point of a text with a syntax error, and the tests compare spans
    and tokens with it.
    """
    return new_parser(propagate_positions=True)

"""Python's own regex parser and its constants, wherever this Python keeps them.

Python 3.11 moved ``sre_parse`` and ``sre_constants`` into ``re`` (``re._parser``,
``re._constants``); planc reads patterns with that parser so that they mean exactly
what ``re`` makes of them. ``sre`` is the constants module, ``sre_parse`` the parser.
"""

import re

try:  # Python >= 3.11
    from re import _compiler as sre_compile
    from re import _constants as sre
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_compile
    import sre_constants as sre
    import sre_parse

__all__ = ["sre", "sre_parse", "compile_item", "python_regex"]


def compile_item(item, flags: int):
    """One parsed pattern item (`(LITERAL, 97)`, `(IN, [...])`, ...) as a compiled Python
    regex, read as planc reads patterns: `\\w`, `\\d`, `\\s` and case as ASCII.

    >>> compile_item((sre.LITERAL, ord("k")), re.IGNORECASE).fullmatch("K") is not None
    True
    """
    state = sre_parse.State()
    state.flags = (flags & ~re.UNICODE) | re.ASCII
    return sre_compile.compile(sre_parse.SubPattern(state, [item]), state.flags)


def python_regex(pattern: str) -> re.Pattern:
    """`pattern` compiled by Python's `re` as planc's matcher reads it (`re.ASCII`), for
    the groups of a path the matcher has already matched: a `rename` template's, a stage
    rule's layer number. A pattern with an inline `(?u)`, where ASCII cannot be asked
    for, is compiled as written."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FutureWarning "possible nested set" and the like
        try:
            return re.compile(pattern, re.ASCII)
        except (re.error, ValueError):
            return re.compile(pattern)

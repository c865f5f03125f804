"""Python's own regex parser and its constants, wherever this Python keeps them.

Python 3.11 moved ``sre_parse`` and ``sre_constants`` into ``re`` (``re._parser``,
``re._constants``); planc reads patterns with that parser so that they mean exactly
what ``re`` makes of them. ``sre`` is the constants module, ``sre_parse`` the parser.
"""

try:  # Python >= 3.11
    from re import _constants as sre
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as sre
    import sre_parse

__all__ = ["sre", "sre_parse"]

r"""planc's one matching engine: which rule patterns match a variable path.

Patterns are written in Python ``re`` syntax (Keras matches ``LayoutMap`` keys with
``re.fullmatch`` since 3.14 and ``re.search`` before) but run on RE2, so matching takes
time linear in the path whatever the pattern, and every pattern is tried in one pass.

>>> m = Matcher([r"dense_\d+/kernel", r".*kernel", "dense_1/kernel"], mode="full")
>>> m.match("dense_1/kernel")
(0, 1, 2)
>>> m.literal("dense_1/kernel")
2
>>> problem = check_pattern(r"(\w+)/\1")
>>> problem.kind, problem.offset
('unsupported', 6)

How a pattern reaches RE2: Python's own parser reads it (so it means exactly what
``re`` makes of it: ``\Z``, ``a{,3}``, ``(?x)``, ``(?P<name>...)``, inline flags) and the
parse tree is written back in RE2 syntax. Every character class, literal and ``.`` is
written out as an explicit set of code points, with the ASCII part decided by Python's
``re`` itself, so RE2's own ideas of ``\s``, ``\d``, ``\w`` or case folding never
enter. Backtracking constructs (backreferences, lookaround, atomic groups, possessive
quantifiers, conditionals) have no RE2 equivalent and are refused by ``check_pattern``.
Most rule patterns are simple (literal text, sets, groups, ``|``, ``* + ?``); those are
read by a small reader of our own into the tree Python's parser would build, several
times faster, and each translation is cached for the ``Matcher`` that follows.

Character policy:

* On a path made of ASCII characters, ``Matcher`` answers exactly as Python's ``re``
  (``re.fullmatch`` for mode "full", ``re.search`` for mode "search"), including
  ``\s`` matching ``\x1c``-``\x1f`` and ``(?i)ı`` matching ``i``.
* A non-ASCII character in a path is matched as under Python's ``re.ASCII`` flag:
  ``\d``, ``\w``, ``\s`` never count it as a digit, word or space character, ``\b``
  treats it as a non-word character, and ``(?i)`` does not fold its case. Python's
  default ``re`` is Unicode-aware there (``\w`` matches ``é``), so Keras may disagree
  on such paths; variable paths are ASCII in practice.
* Line breaks: Python's ``$`` (without ``(?m)``) also matches just before a final
  ``\n``; here it matches only at the very end. Variable paths have no line breaks.
* ``\B`` on the empty path follows the running Python (no match before 3.14).

The modules, each importing only those above it:

* ``python_re``: Python's regex parser and constants, on every supported Python.
* ``scan``: finding constructs in a pattern's text (``nesting_too_deep``, named groups,
  end anchors, where a refused construct is).
* ``re2_text``: a parse tree written as RE2 text, character positions as explicit sets.
* ``simple_reader``: the fast reader of simple patterns, and their RE2 text.
* ``translate``: pattern -> RE2 text by the fastest way that applies;
  ``check_pattern`` and ``PatternProblem``.
* ``matcher``: ``Matcher``, the patterns compiled into RE2 sets.
"""

from planc.matching.matcher import Matcher
from planc.matching.scan import has_end_anchor, nesting_too_deep, without_named_groups
from planc.matching.translate import PatternProblem, check_pattern

__all__ = ["Matcher", "PatternProblem", "check_pattern", "has_end_anchor", "nesting_too_deep",
           "without_named_groups"]

"""Is a source's pattern one planc can run? P523 if not, at the fault when it can be found.

planc runs patterns on RE2 (linear time), so a key Keras would take (a lookahead, a
backreference) or a string that is no regex at all is refused here, pointing at the
source, rather than later at a line of a plan the user never wrote.

>>> from planc.diagnostics import Span
>>> [d.code for d in pattern_problems("dense(?!_1)/kernel", None, "key")]
['P523']
>>> pattern_problems(r"dense_\\d+/kernel", None, "key")
[]
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, Span, error
from planc.matching import check_pattern


def pattern_problems(pattern: str, span: Span | None, what: str) -> list[Diagnostic]:
    """[] when `pattern` is fine; else one P523 at the fault (within `span`, a JSON string
    token, when the string has no escapes before it)."""
    problem = check_pattern(pattern)
    if problem is None:
        return []
    where = span
    if span is not None and span.line == span.end_line and \
            span.end_column - span.column == len(pattern) + 2:
        where = span.shifted(1 + problem.offset, 1)
    if problem.kind == "unsupported":
        message = f"{what} `{pattern}` cannot be imported: {problem.message}"
        fix = "rewrite it without that construct, e.g. as several keys"
    else:
        message = f"{what} `{pattern}` is not a valid regular expression: {problem.message}"
        fix = "correct the regex (Keras fails on every lookup with it)"
    return [error("P523", message, where, label="here", help=fix)]

"""One diagnostic for many variables with the same fault.

A model repeats its layers: 80 decoder blocks that one rule misfits would otherwise give
80 errors that differ only in the layer number.
"""

from __future__ import annotations

import re

from planc.diagnostics import Diagnostic

# The per-variable findings of resolution; the rule-level ones are already one per rule.
_GROUPED = {"P301", "P303", "P304", "P305", "P302", "P308"}

_DIGITS = re.compile(r"\d+")


def grouped(problems: list[Diagnostic]) -> list[Diagnostic]:
    """One diagnostic per cause: (code, rule, message and help with the variable and
    numbers blanked), so the variables a typo misses are one group and a variable no rule
    comes near is another; the first variable's diagnostic counts and names the others.
    Order kept, other codes untouched."""
    groups: dict[tuple, list[Diagnostic]] = {}
    order = []
    for d in problems:
        if d.code not in _GROUPED or d.variable is None:
            key = (id(d),)
        else:
            key = (d.code, d.severity, d.rule, d.span, _blanked_message(d.message, d.variable),
                   tuple(_blanked_message(h, d.variable) for h in d.help))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(d)
    out = []
    for key in order:
        ds = groups[key]
        first = ds[0]
        if len(ds) == 1:
            out.append(first)
            continue
        others = [d.variable for d in ds[1:]]
        shown = ", ".join(f"`{v}`" for v in others[:3]) + (" ..." if len(others) > 3 else "")
        out.append(first._replace(message=f"{first.message} (and {len(others)} more: {shown})",
                           variables=(first.variable, *others)))
    return out


def _blanked_message(message: str, variable: str) -> str:
    """The message with the variable's path and any digits blanked."""
    return _DIGITS.sub("#", message.replace(variable, "<v>"))

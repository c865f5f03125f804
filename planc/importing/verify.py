"""`--model`: the imported plan, resolved against a model, must give every variable exactly
the layout its source gives.

Each importer supplies `expected(variable)`: the source's own answer for that variable
(the real Keras `LayoutMap` lookup, the real `get_layout_map` result, Hugging Face's
style semantics, first-match over the rule list), computed without the plan. It returns
the axes (one entry per dimension: None, a name, or a tuple of names) or, where the
source itself would fail on that variable, a string saying how. Any difference is P529,
naming the variable and both layouts; errors of the plan against the model (P301-P305)
come first and stop the comparison.
"""

from __future__ import annotations

from collections.abc import Callable

from planc.diagnostics import Diagnostic, error
from planc.importing.draft import Written, axes_text
from planc.importing.problems import SourceProblem
from planc.resolve import validate
from planc.sources import SourceError, load_variables
from planc.variables import Variable

Expected = Callable[[Variable], "tuple | str"]


def normal(axes) -> tuple:
    """Axes in one spelling: a one-name tuple is that name, an empty one None.

    >>> normal([None, ("model",), ("batch", "model"), ()])
    (None, 'model', ('batch', 'model'), None)
    """
    out = []
    for entry in axes:
        if isinstance(entry, (tuple, list)):
            entry = tuple(entry)
            entry = entry[0] if len(entry) == 1 else (entry or None)
        out.append(entry)
    return tuple(out)


def model_variables(model) -> tuple[Variable, ...]:
    try:
        return load_variables(model)
    except SourceError as exc:
        raise SourceProblem(f"--model: {exc}") from None


def compare(written: Written, variables, devices: int | None, expected: Expected,
            source: str) -> list[Diagnostic]:
    """Every diagnostic of the plan against `variables`, then P529 for each variable whose
    layout differs from `expected`'s (one per rule and difference, counting the other
    variables it covers, as planc reports 80 decoder layers). `source` names the source."""
    report = validate(written.ir, variables, devices)
    found = list(report.diagnostics)
    if any(d.is_error for d in found) or expected is None:
        return found  # None: the source gives no layouts, only what the plan checks
    differences: dict[tuple, list] = {}
    for a in report.assignments:
        want = expected(a.variable)
        got = normal(a.layout.axes)
        if not isinstance(want, str):
            if normal(want) == got:
                continue
            want = f"gives {axes_text(normal(want))}"
        where = a.rule.span if a.rule is not None else None
        differences.setdefault((where, axes_text(got), want), []).append(a)
    for (where, got, want), assignments in differences.items():
        found.append(_differs(assignments, where, got, want, source))
    return found


def _differs(assignments, where, got: str, want: str, source: str) -> Diagnostic:
    first = assignments[0].variable
    more = len(assignments) - 1
    also = f" (and {more} more variable{'s' if more > 1 else ''} of that rule)" if more else ""
    return error("P529", f"`{first.path}` {first.shape}: the imported plan gives {got}, but "
                 f"{source} {want}{also}", where, variable=first.path,
                 label="the plan's rule" if where else "",
                 help="the source cannot be imported faithfully for this model; fix the "
                      "source, or write this variable's rule by hand")

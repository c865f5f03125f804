"""What a step with a loop of unknown trip count can and cannot promise: its figures count
that loop once, so they are lower bounds, and a budget they are within is not met (P823).
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, warning
from planc.targets.cost.report import seconds_text

__all__ = ["budget_on_lower_bound"]


def budget_on_lower_bound(ir, estimate_s: float, exact: bool, topology: str,
                          unknown_loops=()) -> list[Diagnostic]:
    """P823 where `budget(step)` is within reach only of a lower bound: the estimate of a
    step whose loops are not all counted (`exact` false). An estimate over the budget is
    P813's, bound or not.

    >>> import planc
    >>> ir = planc.loads("mesh(data = 8)\\ndata_parallel\\nbudget(step = 1 s)").ir
    >>> [d.code for d in budget_on_lower_bound(ir, 0.5, False, "cpu:8")]
    ['P823']
    >>> budget_on_lower_bound(ir, 0.5, True, "cpu:8")
    []
    """
    budget = ir.budget.step if ir.budget is not None else None
    if budget is None or exact or estimate_s > budget:
        return []
    loops = len(unknown_loops) or 1
    return [warning(
        "P823", f"`budget(step = {seconds_text(budget)})` is met only by a lower bound: the "
                f"step's estimate on {topology}, {seconds_text(estimate_s)}, counts "
                f"{loops} loop(s) of unknown trip count once, so the step may take longer",
        ir.budget.span or ir.anchor, label="not known to fit",
        help=("give the loop a fixed length (`jax.lax.scan`, or `fori_loop` with constant "
              "bounds) so planc can count it, or measure the step on the chip",))]

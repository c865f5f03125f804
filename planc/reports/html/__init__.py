"""`--format html`: one self-contained page a reviewer opens from disk.

`planc explain PLAN --model SRC --format html -o FILE` and `planc aot ... --format html`
write it: the mesh and its devices, the memory per device, the variables (sortable,
filterable, problems marked), the blocks of a selected variable on every device, and,
from `aot`, the collectives. `data` turns the reports' JSON documents into the page's
data, `page` renders it with its style sheet and script inlined (`page.css`; `page.js`,
`devices.js`, `table.js`). Nothing here imports jax.
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, PlanError, error
from planc.reports.html.data import MAX_PAGE_VARIABLES, aot_data, cost_data, explain_data
from planc.reports.html.page import render_page

__all__ = ["MAX_PAGE_VARIABLES", "explain_page", "aot_page", "cost_page", "refuse_too_many",
           "too_many_variables"]


def explain_page(doc: dict, **kw) -> str:
    """The page of a `planc.explain/1` document (`explain_data` takes `kw`)."""
    return render_page(explain_data(doc, **kw))


def aot_page(doc: dict, **kw) -> str:
    """The page of a `planc.aot/1` document (`aot_data` takes `kw`)."""
    return render_page(aot_data(doc, **kw))


def cost_page(doc: dict, aot: dict, **kw) -> str:
    """The page of a `planc.cost/1` document and its compile's `planc.aot/1` one
    (`cost_data` takes `kw`)."""
    return render_page(cost_data(doc, aot, **kw))


def refuse_too_many(count: int, source: str) -> None:
    """`PlanError` (P532) when `count` variables are more than the page holds."""
    if count > MAX_PAGE_VARIABLES:
        raise PlanError((too_many_variables(count, source),))


def too_many_variables(count: int, source: str) -> Diagnostic:
    """P532: a model too large for the page, located at its source."""
    return error("P532", f"the model has {count:,} variables; the HTML page holds at most "
                         f"{MAX_PAGE_VARIABLES:,}", None, file=source,
                 help="`--format json` and the text table have no such limit; `--var PATH` "
                      "explains one variable")

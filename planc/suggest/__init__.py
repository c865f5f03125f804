"""Suggesting a plan for a model: `planc suggest`.

- `roles`: what each variable is, by shape and structure first, name second;
- `layouts`: one variable's layout on a mesh, and what a model costs there;
- `mesh`: the strategy and axis sizes, fitting a budget (P501, P504, P505);
- `families`: numbered layers generalised, one rule per family of role and layout;
- `writer`: the plan's text, with a header and a comment on every rule;
- `suggester`: `suggest(model, devices, ...)`, checked by planc's own validation.
"""

from planc.suggest.suggester import Suggestion, suggest

__all__ = ["Suggestion", "suggest"]

"""A JSON list of `[regex, spec]` first-match rules (EasyLM / eformer style) as a plan.

The list is tried top to bottom and the first regex found anywhere in the path
(`re.search`) gives the spec: so the plan says `match search` and `overlap first`, and
keeps the list's order. A spec is a list with one entry per dimension: `null` (not
split), an axis name, or a list of axis names; `[]` is JAX's `PartitionSpec()`, which
replicates a variable of any rank, and becomes `replicated`. Axes come from `--mesh`.

>>> from planc.importing.jsonpos import parse
>>> root = parse('[["embed", ["model", null]], [".*", []]]', "r.json")
>>> [(r.pattern, r.layout) for r in rules_of(root, {"model"})]
[('embed', '(model, _)'), ('.*', 'replicated')]
"""

from __future__ import annotations

import re

from planc.diagnostics import PlanError, error
from planc.importing.draft import Draft, DraftRule, axes_text, plan_name
from planc.importing.jsonpos import Node
from planc.importing.patterns import pattern_problems
from planc.variables import Variable

_SHAPE_HELP = 'each rule is `["regex", spec]`, e.g. `["attn/(q|k|v)", [null, "model"]]`'


def rules_of(root: Node, axes: set[str]) -> list[DraftRule]:
    """The rules of the list `root`; raises `PlanError` with every fault found."""
    if not isinstance(root.value, list):
        raise PlanError((error("P522", "a rule list must be a JSON list of "
                               "`[regex, spec]` pairs", root.span, help=_SHAPE_HELP),), {})
    rules, problems = [], []
    for entry in root.items:
        if not (isinstance(entry.value, list) and len(entry.items) == 2):
            problems.append(error("P522", "a rule must be a pair `[regex, spec]`", entry.span,
                                  help=_SHAPE_HELP))
            continue
        key, spec = entry.items
        if not isinstance(key.value, str):
            problems.append(error("P522", "a rule's regex must be a string", key.span,
                                  help=_SHAPE_HELP))
            continue
        found = pattern_problems(key.value, key.span, "regex")
        layout = _layout(spec, axes, found)
        problems += found
        if not found:
            rules.append(DraftRule(key.value, layout, origin=key.span, what="regex"))
    if problems:
        raise PlanError(tuple(problems), {})
    return rules


def _layout(spec: Node, axes: set[str], problems: list) -> str:
    if not isinstance(spec.value, list):
        problems.append(error("P522", "a spec must be a list with one entry per dimension "
                              "(null, an axis name, or a list of axis names)", spec.span,
                              help=_SHAPE_HELP))
        return ""
    if not spec.items:
        return "replicated"
    entries = []
    for item in spec.items:
        names = item.value if isinstance(item.value, list) else [item.value]
        if item.value is None:
            entries.append(None)
            continue
        if not names or not all(isinstance(n, str) for n in names):
            problems.append(error("P522", "a spec entry must be null, an axis name, or a "
                                  "non-empty list of axis names", item.span, help=_SHAPE_HELP))
            continue
        unknown = [n for n in names if n not in axes]
        if unknown:
            problems.append(error("P525", f"axis `{unknown[0]}` is not in --mesh "
                                  f"({', '.join(sorted(axes))})", item.span,
                                  help="add it to --mesh, or correct the name"))
            continue
        entries.append(names[0] if len(names) == 1 else tuple(names))
    used = [n for e in entries if e is not None for n in ((e,) if isinstance(e, str) else e)]
    twice = sorted({n for n in used if used.count(n) > 1})
    if twice:
        problems.append(error("P525", f"axis `{twice[0]}` splits two dimensions of one spec",
                              spec.span, help="a mesh axis can split one dimension only"))
    return axes_text(entries)


def draft(root: Node, file: str, mesh, batch: str, command: str) -> Draft:
    rules = rules_of(root, {n for n, _ in mesh})
    return Draft(plan_name(file.rsplit("/", 1)[-1].split(".")[0]),
                 (f"Imported with `{command}`.",
                  "First-match rules: the first regex found in the path (re.search) wins."),
                 mesh, batch, "search", "first", tuple(rules))


def expected(root: Node):
    """First match over the list, as EasyLM's `match_partition_rules` does, in JAX's
    terms: a spec shorter than the rank leaves the trailing dimensions unsplit."""
    table = [(re.compile(k.value), s.value) for k, s in (e.items for e in root.items)]

    def layout(var: Variable):
        rank = len(var.shape)
        for regex, spec in table:
            if regex.search(var.path):
                if not spec:
                    return (None,) * rank
                if len(spec) > rank:
                    return f"gives a spec of {len(spec)} entries to a rank-{rank} variable"
                return tuple(spec) + (None,) * (rank - len(spec))
        return (None,) * rank

    return layout

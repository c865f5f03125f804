"""How one variable is resolved, step by step: the trace `planc explain --var` shows.

Every rule and whether it matches, which one won and why, each alternative of its layout
and why the earlier ones failed. The trace reads the resolver's own decision
(`Resolver.decide`) and fitting (`Resolver.fit`); it decides nothing itself. The
``TRACE`` object is documented with the explain document, in `planc.reports.explain`.
"""

from __future__ import annotations


from planc.diagnostics import Diagnostic
from planc.ir import Rule, layout_text
from planc.matching import Matcher
from planc.resolve.memory import shard_bytes
from planc.resolve.report import Report, axes_json
from planc.resolve.resolver import Resolver
from planc.resolve.resolution import Reason
from planc.variables import Variable

# What binding the plan to the device count found: shown with every trace.
_BINDING_CODES = ("P201", "P118", "P122", "P202")


def trace_in_report(report: Report, var: Variable, devices: int | None
                    ) -> tuple[list[Diagnostic], dict | None]:
    """(diagnostics to show, trace) of `var` under the binding `report` was made with.

    The diagnostics are the binding's and those resolving `var` gives (carrying `devices`
    when a count was given); the trace is None when the plan does not fit the count.
    """
    binding = [d for d in report.diagnostics if d.code in _BINDING_CODES]
    if not report.assignments:  # the plan does not fit the device count
        return binding, None
    resolver = Resolver(report.ir)
    _, problems = resolver.resolve(var)
    if devices is not None:
        problems = [d._replace(devices=devices) for d in problems]
    return binding + problems, trace(resolver, var)


def trace(resolver: Resolver, var: Variable) -> dict:
    """How `resolver` resolves `var`, step by step (the TRACE object of the schema)."""
    ir = resolver.ir
    path = var.path
    other_mode = "search" if ir.match == "full" else "full"
    patterns = [r.pattern for r in resolver.rules]
    other = Matcher(patterns, other_mode).match(path) if patterns else ()
    hits = resolver.matcher.match(path)
    literal = resolver.matcher.literal(path)
    rules = []
    for r in resolver.rules:
        rules.append({**_where(r), "matches": r.index in hits, "literal": r.index == literal,
                      "matches_other_mode": r.index in other})
    default = resolver.default
    names = resolver.own_names(var, [])
    winner, reason = resolver.decide(path, hits, names)
    why = reason.sentence(winner, hits, var.rank)
    if names is not None and reason is not Reason.OWN_NAMES:
        # Where a path rule and the variable's own names both apply, say which decided.
        why += (f"; it overrides the variable's own logical names "
                f"({', '.join('_' if n is None else n for n in names)})")
    info = {
        "path": path, "shape": list(var.shape), "dtype": var.dtype,
        "match": ir.match, "overlap": ir.overlap,
        "rules": rules,
        "default": None if default is None else {**_where(default),
                                                  "layout": default.layout.text},
        "reason": reason.value, "why": why,
        "winner": None if winner is None else _where(winner),
        "alternatives": [], "taken": None,
    }
    assignment, _ = resolver.resolve(var)
    if winner is not None:
        info["alternatives"], info["taken"] = _alternatives(resolver, winner, var)
    layout = assignment.layout
    if names is not None:
        info["names"] = list(names)
    info["axes"] = axes_json(layout.axes)
    info["layout"] = layout.text
    info["blocks"] = list(layout.blocks)
    shard = layout.shard_shape(var.shape, resolver.sizes)
    info["shard_shape"] = None if shard is None else list(shard)
    info["bytes_per_device"] = None if shard is None else shard_bytes(shard, var.dtype)
    return info


def _where(rule: Rule) -> dict:
    span = rule.span
    return {"file": span.file if span else None, "line": span.line if span else None,
            "pattern": rule.pattern}


def _alternatives(resolver: Resolver, rule: Rule, var: Variable) -> tuple[list[dict], int]:
    """Each alternative of `rule`'s layout as the resolver's fitting tried it, and the
    index of the one taken (-1: none fits)."""
    layout, taken, misfits = resolver.fit(rule, var.shape)
    failed = {m.alternative: m for m in misfits}
    out = []
    for i, alt in enumerate(rule.layout.alternatives):
        text = layout_text(alt)
        misfit = failed.get(i)
        if misfit is not None:
            why = (f"needs {alt.rank_text}, the variable has rank {var.rank}"
                   if misfit.dim is None else resolver.indivisible_text(alt, var, misfit))
            out.append({"layout": text, "status": "failed", "why": why})
        elif i == taken:
            unknown = sorted({a for a in layout.mesh_axes() if resolver.sizes.get(a) is None})
            why = (f"divisibility over {', '.join(f'`{a}`' for a in unknown)} not checked: its "
                   "size is `auto` (pass --devices)") if unknown else None
            out.append({"layout": text, "status": "taken", "why": why})
        else:
            out.append({"layout": text, "status": "not tried", "why": None})
    return out, taken

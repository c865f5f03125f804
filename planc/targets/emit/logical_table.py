"""What the `flax` and `maxtext` targets share: the plan's `axes` table as rules, and the
refusal of what those rules cannot say.

Flax's and MaxText's rules map logical names to mesh axes and nothing else: a plan's path
rules, `state` and `outputs` rules have no form there. Writing the table without them
would drop them silently, so each is refused at its rule (P311); `default -> replicated`
is what those rules already do for a variable without names, and is kept.

With the model, a path rule that gives each variable it lays out what the variable's own
names give it through the table (`planc.ir.assign_logical`) says nothing the rules do not:
it is dropped, with a note (P143). Any other path rule is refused naming the variables
whose layout would change, and how.
"""

from __future__ import annotations

from planc.diagnostics import PlanError, error, note
from planc.ir import Dim, PlanIR, assign_logical, layout_text
from planc.targets.emit.codegen import refuse_errors

# Variables a refusal names before "and N more".
_SHOWN = 3


def logical_rules(ir: PlanIR, resolution, target: str, notes: list | None = None) -> tuple:
    """`((name, axes), ...)` of the table, in order; `PlanError` where the plan says more
    than the table (or, with `resolution`, has errors against the model). With
    `resolution`, a path rule that only restates its variables' own names is left out,
    with a P143 note appended to `notes`."""
    refuse_errors(ir, resolution)
    problems = []
    if not ir.logical_axes:
        problems.append(error("P311", f"the {target} target writes the plan's `axes` table, "
                              "and this plan has none", ir.anchor,
                              help="add `axes { NAME -> AXES ... }`; path rules have no "
                                   f"form in {target}'s logical axis rules"))
    changed = _changed_by_rules(ir, resolution) if ir.logical_axes else None
    extra = [*ir.state, *ir.outputs,
             *(r for r in (ir.state_default, ir.outputs_default) if r is not None)]
    if ir.default is not None and not all(a.replicated for a in ir.default.layout.alternatives):
        extra.append(ir.default)
    for rule in ir.rules:
        moved, count = changed[rule.index] if changed is not None else ([], 0)
        if not count:  # no variable shows what it would mean: refused as written
            extra.append(rule)
        elif moved:
            problems.append(_changes(rule, moved, target))
        elif notes is not None:
            notes.append(note(
                "P143", f"rule {rule.label} -> {rule.layout.text} gives {_count(count)} it "
                        f"lays out what {'its' if count == 1 else 'their'} own names give "
                        f"through the `axes` table: left out of {target}'s rules, which "
                        "say the same", rule.span, label="restates the names",
                help="nothing to fix; remove the rule to say so in the plan too"))
    for rule in extra:
        problems.append(error("P311", f"{target}'s logical axis rules cannot say the rule "
                              f"{rule.label} -> {rule.layout.text}: they map names to mesh "
                              "axes, never paths", rule.span, label="no form in the rules",
                              help="name the variable's dimensions in the model and map the "
                                   "names in `axes`, or keep this plan for planc's own "
                                   "targets (jax, keras, torch)"))
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)
    return tuple((e.name, e.axes) for e in ir.logical_axes)


def _count(n: int) -> str:
    return f"the {n} variables" if n != 1 else "the variable"


def _changed_by_rules(ir: PlanIR, resolution) -> dict | None:
    """`{rule index: ([(variable, its layout, its names' layout), ...], how many it lays
    out)}` for the path rules, against the model; None without it."""
    if resolution is None:
        return None
    out = {rule.index: ([], 0) for rule in ir.rules}
    for a in resolution.assignments:
        if a.rule is None or a.rule.index not in out:
            continue
        moved, count = out[a.rule.index]
        mine = tuple(_axes_of(e) for e in a.layout.axes)
        names = a.variable.names or (None,) * len(mine)
        theirs = tuple(axes or () for axes in assign_logical(ir.logical_axes, names))
        if (mine != theirs or a.layout.host
                or any(b != 1 for b in a.layout.blocks)):
            moved.append((a.variable, a.layout.text,
                          layout_text(tuple(Dim(axes) for axes in theirs))))
        out[a.rule.index] = (moved, count + 1)
    return out


def _axes_of(entry) -> tuple:
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def _changes(rule, moved: list, target: str):
    """P311 for path rule `rule`, naming the variables `target`'s rules would lay out
    otherwise: what the rule gives each, and what its own names would."""
    shown = "; ".join(f"`{v.path}` {list(v.shape)} gets {mine}, its names "
                      f"({', '.join(n or '_' for n in (v.names or ()))}) give {theirs}"
                      if v.names else f"`{v.path}` {list(v.shape)} gets {mine}, and it "
                      f"names no dimension: {theirs}" for v, mine, theirs in moved[:_SHOWN])
    more = f" (and {len(moved) - _SHOWN} more)" if len(moved) > _SHOWN else ""
    return error("P311", f"{target}'s logical axis rules cannot say the rule {rule.label} -> "
                 f"{rule.layout.text}, and without it {len(moved)} variable"
                 f"{'s' if len(moved) != 1 else ''} would be laid out otherwise: {shown}"
                 f"{more}", rule.span, label="changes these variables' layouts",
                 help="name the dimensions in the model so that the `axes` table gives "
                      "these layouts, or keep this plan for planc's own targets (jax, "
                      "keras, torch)")

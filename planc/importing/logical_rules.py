"""Logical axis rules, as Flax and MaxText write them, read into a plan's `axes` table.

A rule is a pair `[NAME, AXES]`: AXES is one mesh axis (`"fsdp"`), several (`["fsdp",
"fsdp_transpose"]`, major to minor), or none (`null`, `[]`). The order is kept, and a
name may repeat: later pairs are fallbacks, exactly as `flax.linen.logical_to_mesh_axes`
reads them, so the table means what the rules meant.

Flax's form is a tuple of pairs in Python (`planc import rules:RULES --mesh ...`) or the
same as a JSON list (`planc import rules.json --from flax --mesh ...`); MaxText's is the
`logical_axis_rules` of its YAML configs (`planc.importing.maxtext`).

>>> from planc.importing.jsonpos import parse
>>> root = parse('[["embed", "fsdp"], ["mlp", ["tp"]], ["kv", null]]', "r.json")
>>> [(e.name, e.axes) for e in entries_of(root, {"fsdp", "tp"}, "the rules")]
[('embed', ('fsdp',)), ('mlp', ('tp',)), ('kv', ())]
"""

from __future__ import annotations

from planc.diagnostics import PlanError, error
from planc.importing.draft import DraftAxis, axis_problem
from planc.importing.jsonpos import Node
from planc.importing.problems import SourceProblem

_HELP = ('each rule is a pair `[name, axes]`: `["embed", "fsdp"]`, '
         '`["batch", ["data", "fsdp"]]` or `["kv", null]`')


def entries_of(root: Node, mesh_axes: set[str], what: str) -> list[DraftAxis]:
    """The table of the rule list `root`; raises `PlanError` with every fault found."""
    if not isinstance(root.value, (list, tuple)):
        raise PlanError((error("P522", f"{what} must be a list of `[name, axes]` pairs",
                               root.span, help=_HELP),), {})
    out, problems = [], []
    for entry in root.items:
        if not (isinstance(entry.value, (list, tuple)) and len(entry.items) == 2):
            problems.append(error("P522", "a logical axis rule must be a pair `[name, axes]`",
                                  entry.span, help=_HELP))
            continue
        key, target = entry.items
        name = key.value
        why = axis_problem(name)
        if why is not None:
            problems.append(error("P522", f"logical name {why}", key.span, help=_HELP))
            continue
        if name in mesh_axes:
            problems.append(error("P525", f"logical name `{name}` is also a mesh axis, which "
                                  "a plan cannot say", key.span,
                                  help="rename the logical name in the rules and the model"))
            continue
        axes = _axes(target, mesh_axes, problems)
        if axes is not None:
            out.append(DraftAxis(name, axes, key.span))
    if problems:
        raise PlanError(tuple(problems), {})
    return out


def _axes(node: Node, mesh_axes: set[str], problems: list) -> tuple[str, ...] | None:
    value = node.value
    if value is None:
        return ()
    if isinstance(value, str):
        names = [(value, node)]
    elif isinstance(value, (list, tuple)) and all(isinstance(i.value, str) for i in node.items):
        names = [(i.value, i) for i in node.items]
    else:
        problems.append(error("P522", "a rule's axes must be a mesh axis, a list of them, or "
                              "null", node.span, help=_HELP))
        return None
    out = []
    for n, at in names:
        if n not in mesh_axes:
            problems.append(error("P525", f"axis `{n}` is not in the mesh "
                                  f"({', '.join(sorted(mesh_axes))})", at.span,
                                  help="add it to the mesh, or correct the name"))
            return None
        if n in out:
            problems.append(error("P525", f"axis `{n}` is named twice in one rule", at.span,
                                  help="a mesh axis splits a dimension once"))
            return None
        out.append(n)
    return tuple(out)


def expected(entries):
    """The `expected(variable)` of `planc.importing.verify` for these rules: Flax's own
    `logical_to_mesh_axes` of the variable's names (a variable without names is not
    split). Needs flax: the answer must come from Flax, not from planc's own reading."""
    try:
        import flax.linen as nn
    except ImportError:
        raise SourceProblem("proving logical axis rules against --model runs Flax's own "
                            "logical_to_mesh_axes: pip install flax") from None
    rules = tuple((e.name, None if not e.axes else e.axes[0] if len(e.axes) == 1 else e.axes)
                  for e in entries)

    def want(variable):
        if variable.names is None:
            return (None,) * len(variable.shape)
        try:
            return tuple(nn.logical_to_mesh_axes(variable.names, rules))
        except ValueError as exc:
            return f"refuses its names: {exc}"
    return want


def looks_like_rules(obj) -> bool:
    """Whether a Python object is Flax logical axis rules: a non-empty tuple or list of
    pairs whose first items are strings and second a string, a sequence or None."""
    return (isinstance(obj, (tuple, list)) and len(obj) > 0 and all(
        isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str)
        and (p[1] is None or isinstance(p[1], (str, tuple, list))) for p in obj))


def node_of(obj, span=None) -> Node:
    """A Python value as a `Node` tree, every span `span` (a Python object has no lines)."""
    if isinstance(obj, (tuple, list)):
        return Node(list(obj), span, tuple(node_of(i, span) for i in obj))
    return Node(obj, span)

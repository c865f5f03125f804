"""A variable's own logical names, read through the plan's `axes` table.

Flax models name the dimensions of their parameters (`nnx.with_partitioning(init,
("embed", "mlp"))`, Linen's `LogicallyPartitioned`); the model sources keep those names
on the `Variable`. Where no path rule matches such a variable, the resolver lays it out
by its names: each name takes mesh axes as `planc.ir.assign_logical` says, exactly as
`flax.linen.logical_to_mesh_axes` would. A path rule still wins where one matches.

What Flax passes over in silence is said here: a name with no entry in the table
(P343) and a name whose entries all find their axes taken (P155) leave a dimension
unsplit, each a warning with the bytes it keeps; names that do not fit the variable's
rank, or name one dimension twice, are an error (P344).
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, Label, error, warning
from planc.ir import UNSPLIT, Alternative, Dim, Layout, PlanIR, Rule, assign_logical, layout_text
from planc.resolve.memory import human_bytes
from planc.variables import Variable


class OwnNames:
    """The rules made from variables' own names for one plan: one per distinct names."""

    def __init__(self, ir: PlanIR):
        self.ir = ir
        self.table = ir.logical_axes
        self.entries: dict[str, list] = {}
        for e in self.table:
            self.entries.setdefault(e.name, []).append(e)
        self.sizes = {a.name: a.global_size for a in ir.mesh.axes}
        self._rules: dict[tuple, tuple[Rule, tuple]] = {}

    def usable(self, var: Variable, problems: list) -> tuple | None:
        """`var.names` when they can lay it out; None when it has none, or after P344."""
        names = var.names
        if names is None:
            return None
        if len(names) != len(var.shape):
            problems.append(error(
                "P344", f"`{var.path}` {list(var.shape)} names {len(names)} dimension"
                f"{'s' if len(names) != 1 else ''} {_names_text(names)} but has "
                f"{len(var.shape)}", self.ir.logical_span, label="its names cannot be read",
                help="fix the names where the model sets them, or lay the variable out "
                     "with a path rule", variable=var.path))
            return None
        seen = [n for n in names if n is not None]
        twice = sorted({n for n in seen if seen.count(n) > 1})
        if twice:
            problems.append(error(
                "P344", f"`{var.path}` names two dimensions `{twice[0]}` "
                f"{_names_text(names)}", self.ir.logical_span,
                label="its names cannot be read",
                help="a logical name stands for one dimension (Flax refuses it twice too); "
                     "fix the names where the model sets them, or lay it out with a path rule",
                variable=var.path))
            return None
        return tuple(names)

    def rule(self, names: tuple) -> Rule:
        """The rule that lays out a variable whose own names are `names`."""
        found = self._rules.get(names)
        if found is None:
            found = self._rules[names] = self._build(names)
        return found[0]

    def _build(self, names: tuple) -> tuple[Rule, tuple]:
        got = assign_logical(self.table, names)
        dims = []
        for name, axes in zip(names, got):
            if name is None:
                dims.append(UNSPLIT)
            else:
                dims.append(Dim(axes or (), 1, None, (name,)))
        alt = Alternative(tuple(dims))
        span = self.ir.logical_span
        rule = Rule(-2 - len(self._rules), None, Layout((alt,), layout_text(alt), span),
                    span, span, None, names)
        # The dimensions left whole: (index, name, kind), kind "missing" or "taken".
        whole = tuple((k, n, "missing" if n not in self.entries else "taken")
                      for k, (n, a) in enumerate(zip(names, got)) if n is not None and a is None)
        return rule, whole

    def findings(self, rule: Rule, var: Variable) -> list[Diagnostic]:
        """P343 and P155 for the dimensions of `var` its names leave whole."""
        _, whole = self._rules[rule.names]
        out = []
        for k, name, kind in whole:
            if kind == "missing":
                out.append(warning(
                    "P343", f"`{var.path}` names dimension {k} `{name}`, which the `axes` "
                    f"table has no entry for: it is not split, and the variable keeps "
                    f"{human_bytes(var.nbytes)} whole along it", self.ir.logical_span,
                    label="no entry for this name",
                    help=f"add `{name} -> AXES` to the table, or `{name} -> _` to say it is "
                         "meant whole", variable=var.path))
                continue
            entries = self.entries[name]
            if all(_split_by(e.axes, self.sizes) == 1 for e in entries):
                continue  # every entry is over axes of size 1: nothing would be split
            taken = sorted({axis for dim in rule.layout.alternatives[0].head
                            for axis in dim.axes})
            out.append(warning(
                "P155", f"`{var.path}` names dimension {k} `{name}`, but every entry for "
                f"it finds its axes taken in this variable ({', '.join(map(repr, taken))}): "
                f"it is not split ({human_bytes(var.nbytes)})", entries[0].span,
                label="entry taken", secondary=tuple(Label(e.span, "entry taken")
                                                     for e in entries[1:]),
                help=f"add a fallback entry `{name} -> ...` with free axes, or "
                     f"`{name} -> _` to say it is meant whole", variable=var.path))
        return out


def _split_by(axes, sizes) -> int:
    n = 1
    for a in axes:
        s = sizes.get(a)
        n *= 2 if s is None else s  # `auto`: more than one device, presumably
    return n


def _names_text(names) -> str:
    return "(" + ", ".join("_" if n is None else n for n in names) + ")"

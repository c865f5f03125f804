"""The checker's `axes` table: logical dimension names and the mesh axes each maps to.

A name maps to mesh axes only, never to another name, so no table can hold a cycle. A
name may repeat: later entries are fallbacks, tried when an earlier entry's axes are
already taken in the array (`planc.ir.assign_logical`, as Flax assigns them).
"""

from __future__ import annotations

from planc.check.base import CheckerBase, listing
from planc.diagnostics import Label, warning
from planc.ir import LogicalAxis, Mesh


class LogicalAxes(CheckerBase):
    """`axes { NAME -> AXES ... }` -> the IR's table, every entry checked against the mesh."""

    # By name, each name's entries in table order; and the table as the IR holds it.
    logical: dict[str, tuple[LogicalAxis, ...]] = {}
    ir_table: tuple[LogicalAxis, ...] = ()

    def _logical_axes(self, statements, mesh: Mesh) -> tuple[LogicalAxis, ...]:
        axis_names = self._axis_set(mesh)
        # One table, as one `stages`: two would merge silently, and which entry is a
        # name's fallback would hang on the order the blocks were written or included in.
        self._once(statements.axes, "`axes` table")
        rules = [r for section in statements.axes[:1] for r in section.rules]
        names = {r.name.text for r in rules} - axis_names
        table: list[LogicalAxis] = []
        earlier: dict[str, list[LogicalAxis]] = {}
        for r in rules:
            name = r.name.text
            if name in axis_names:
                self.err("P150", f"`{name}` is a mesh axis and cannot also be a logical name",
                         r.name.span, label="already a mesh axis",
                         help=f"a layout that writes `{name}` means the mesh axis; give the "
                              f"logical dimension another name, e.g. `{name}_dim`")
                continue
            axes = []
            ok = True
            for a in r.axes:
                if a.text in names:
                    self.err("P151", f"`{a.text}` is a logical name: a name maps to mesh "
                             "axes, not to another name", a.span, label="a logical name",
                             help=f"write the mesh axes `{a.text}` maps to, of "
                                  f"{listing(mesh.names)}")
                    ok = False
                elif a.text not in axis_names:
                    self._unknown_axis(a, mesh)
                    ok = False
                elif a.text in axes:
                    self.err("P104", f"axis `{a.text}` is named twice in the entry of `{name}`",
                             a.span, label="named again",
                             help="a mesh axis splits a dimension once")
                    ok = False
                else:
                    axes.append(a.text)
            if not ok:
                continue
            entry = LogicalAxis(name, tuple(axes), r.span)
            for before in earlier.get(name, ()):
                if set(before.axes) <= set(entry.axes):
                    # `before` applies whenever this entry could: either it is taken, or
                    # one of its axes is taken, and then one of this entry's is too.
                    self.diags.append(warning(
                        "P152", f"the entry `{entry.text}` can never apply: the earlier "
                        f"`{before.text}` takes `{name}` whenever its axes are free, and "
                        "when they are not, neither are this entry's", r.span,
                        label="never applies",
                        secondary=(Label(before.span, "applies first"),),
                        help="remove it, or move it above the earlier entry if it is the "
                             "one meant to apply first"))
                    break
            earlier.setdefault(name, []).append(entry)
            table.append(entry)
        self.logical = {n: tuple(e) for n, e in earlier.items()}
        return tuple(table)

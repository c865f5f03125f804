"""What every part of the checker shares: the diagnostics it gathers, did-you-mean hints
within a budget, and the checks that several statements make (given more than once, a
positive integer, an axis the mesh does not have)."""

from __future__ import annotations

from planc.diagnostics import Diagnostic, Label, error
from planc.diagnostics.did_you_mean import did_you_mean
from planc.ir import Mesh
from planc.syntax import ast

# What suggestions may cost one check: choices looked at, and edit-distance cells.
_HINT_SCANS = 1_000_000
_HINT_CELLS = 1_000_000


class CheckerBase:
    """One plan's check in progress: the diagnostics found so far, and what they share."""

    def __init__(self, file: str, overrides: dict):
        self.file = file
        self.overrides = dict(overrides)
        self.diags: list[Diagnostic] = []
        self._mesh_names: tuple = (None, frozenset())
        self._scan_budget, self._cell_budget = _HINT_SCANS, _HINT_CELLS

    def err(self, code, message, span, **kw):
        self.diags.append(error(code, message, span, **kw))

    def _axis_set(self, mesh: Mesh) -> frozenset:
        """`mesh.names` as a set, built once per mesh (the property builds a tuple per call,
        and a plan can name thousands of axes thousands of times)."""
        if self._mesh_names[0] is not mesh:
            self._mesh_names = (mesh, frozenset(mesh.names))
        return self._mesh_names[1]

    def _hint(self, word: str, *choices) -> str | None:
        """`did_you_mean(word, choices)` within this check's budget, or None.

        Each suggestion compares `word` with every choice; thousands of unknown names
        against thousands of parameters would otherwise take hours. Choices whose length
        alone rules them out are skipped, which never changes the answer.
        """
        size = sum(len(c) for c in choices)
        if size > self._scan_budget or len(word) > 64:
            return None
        self._scan_budget -= size
        near = [c for cs in choices for c in cs
                if abs(len(c) - len(word)) <= max(1, min(len(c), len(word)) // 3)]
        cost = sum((len(word) + 1) * (len(c) + 1) for c in near)
        if cost > self._cell_budget:
            return None
        self._cell_budget -= cost
        return did_you_mean(word, near)

    def _once(self, stmts: list, what: str) -> None:
        for extra in stmts[1:]:
            self.err("P114", f"{what} is given more than once", extra.span,
                     label="repeated here", secondary=(Label(stmts[0].span, "first given here"),),
                     help=f"a plan has at most one {what}")

    def _int_value(self, node, params, what: str, *, allow_zero=False) -> int | None:
        """A positive integer from a literal or an integer param, or None after a diagnostic."""
        if isinstance(node, (ast.IntLit, ast.SizeLit)):
            value, where = node.value, ""
        elif isinstance(node, ast.Name):
            if node.text not in params:
                self.err("P108", f"unknown parameter `{node.text}`", node.span,
                         label="not declared",
                         help=self._hint(node.text, params) or
                         f"declare it: `param {node.text} = ...`")
                return None
            value = params[node.text][1]
            where = f" (parameter `{node.text}` = {value!r})"
            if not isinstance(value, int):
                self.err("P112", f"{what} must be a positive integer{where}", node.span,
                         label="not an integer")
                return None
        else:
            self.err("P112", f"{what} must be a positive integer", node.span,
                     label="not an integer")
            return None
        if value < 0 or (value == 0 and not allow_zero):
            self.err("P112", f"{what} must be a positive integer, not {value}{where}", node.span,
                     label="not positive")
            return None
        return value

    def _unknown_axis(self, name: ast.Name, mesh: Mesh, what="mesh axis") -> None:
        if name.text == "None":
            self.err("P008", "`None` is Python; planc writes `_` for a dimension that is not split",
                     name.span, label="write `_` here", help="replace `None` with `_`")
            return
        hint = self._hint(name.text, mesh.names)
        self.err("P101", f"unknown {what} `{name.text}`", name.span, label="not in the mesh",
                 help=hint or f"the mesh axes are {listing(mesh.names)}")


def listing(names, limit: int = 10) -> str:
    """`a`, `b`, ... for a help line, the first `limit` names and a count of the rest."""
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")

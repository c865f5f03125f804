"""The checker's declarations: the plan's params (and their overrides), its mesh, slices
and axis types, its distribution and batch axes, and the `match` and `overlap` modes."""

from __future__ import annotations

import re

from planc import limits
from planc.check.base import CheckerBase, listing
from planc.diagnostics import Label, Span
from planc.ir import Mesh, MeshAxis
from planc.syntax import ast

# An integer override as the plan writes integers (ASCII digits, `_` between them),
# compiled by `re` when first used (few plans need it), not on every import.
_OVERRIDE_INT = r"-?[0-9]+(?:_[0-9]+)*"


class Declarations(CheckerBase):
    """What a plan declares about itself, checked statement by statement."""

    def _params(self, statements) -> dict[str, tuple[ast.ParamStmt, int | str]]:
        params: dict[str, tuple[ast.ParamStmt, int | str]] = {}
        for stmt in statements.params:
            pname = stmt.name.text
            if pname in params:
                self.err("P120", f"parameter `{pname}` is declared more than once", stmt.name.span,
                         label="declared again", secondary=(Label(params[pname][0].name.span,
                                                                  "first declared here"),))
                continue
            v = stmt.value
            if isinstance(v, (ast.IntLit, ast.SizeLit)):
                params[pname] = (stmt, v.value)
            elif isinstance(v, ast.StrLit):
                params[pname] = (stmt, v.value)
            else:
                self.err("P110", f"parameter `{pname}` must be an integer or a string",
                         v.span, label="not a literal",
                         help='write a literal, e.g. `param tp = 2` or `param mode = "x"`')
        for oname, raw in self.overrides.items():
            if oname not in params:
                hint = self._hint(oname, params)
                declared = ", ".join(f"`{p}`" for p in params) or "none"
                self.err("P109", f"`{oname}` is overridden but the plan declares no such "
                         f"parameter (declared: {declared})", None,
                         help=hint or f"declare it in the plan: `param {oname} = ...`")
                continue
            stmt, old = params[oname]
            value = self._override_value(oname, raw, old, stmt)
            if value is not None:
                params[oname] = (stmt, value)
        return params

    def _override_value(self, pname, raw, old, stmt):
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            self.err("P110", f"override of `{pname}` must be an integer or a string, "
                     f"not {type(raw).__name__}", stmt.name.span, label="declared here")
            return None
        if isinstance(old, int):
            if isinstance(raw, int):
                return raw
            text = raw.strip()
            # The plan's own integer syntax (ASCII digits, `_` between them), with a sign:
            # `int()` alone would take `٣` or `𝟒` and raise on `²`.
            if re.fullmatch(_OVERRIDE_INT, text) and len(text.lstrip("-").replace("_", "")) <= 30:
                return int(text)
            self.err("P110", f"`{pname}` is an integer parameter; the override `{raw}` is not "
                     "an integer (ASCII digits, optionally signed, `_` between digits)",
                     stmt.name.span, label="declared here as an integer")
            return None
        return str(raw)

    def _mesh(self, statements, params, distribution) -> Mesh:
        self._once(statements.mesh, "`mesh`")
        if not statements.mesh:
            # Without any distribution statement, P114 "no distribution" already says it.
            if distribution == "model_parallel" and statements.distribution:
                self.err("P114", "a `model_parallel` plan needs a `mesh(...)` statement",
                         statements.distribution[0].span,
                         label="no mesh declared",
                         help="add e.g. `mesh(batch = auto, model = 2)`")
            return Mesh((MeshAxis("batch", None),), None)
        stmt = statements.mesh[0]
        if not stmt.axes:
            self.err("P112", "a mesh needs at least one axis", stmt.span, label="empty mesh",
                     help="e.g. `mesh(batch = auto)`")
        axes: list[MeshAxis] = []
        seen: dict[str, ast.AxisDecl] = {}
        autos = []
        for decl in stmt.axes:
            n = decl.name.text
            if n in seen:
                self.err("P102", f"mesh axis `{n}` is declared twice", decl.name.span,
                         label="declared again",
                         secondary=(Label(seen[n].name.span, "first declared here"),))
                continue
            seen[n] = decl
            if isinstance(decl.size, ast.Auto):
                autos.append(decl)
                size = None
            else:
                size = self._int_value(decl.size, params, f"the size of mesh axis `{n}`")
                size = 1 if size is None else size
            axes.append(MeshAxis(n, size, decl.span))
        for extra in autos[1:]:
            self.err("P103", "only one mesh axis can be `auto`", extra.size.span,
                     label="second `auto`",
                     secondary=(Label(autos[0].size.span, "first `auto` here"),),
                     help="give this axis a size or a parameter")
        return Mesh(tuple(axes), stmt.span)

    def _slices(self, statements, params, mesh: Mesh) -> Mesh:
        self._once(statements.slices, "`slices`")
        if not statements.slices:
            return mesh
        counts: dict[str, int] = {}
        for kw in statements.slices[0].items:
            n = kw.name.text
            if n not in self._axis_set(mesh):
                self._unknown_axis(kw.name, mesh)
                continue
            if n in counts:
                self.err("P102", f"axis `{n}` is named twice in `slices`", kw.name.span,
                         label="named again")
                continue
            v = self._int_value(kw.value, params, f"the slice count of `{n}`")
            if v is not None and v > limits.MAX_SLICES:
                self.err("P131", f"`{n}` spans {v:,} slices: more than {limits.MAX_SLICES:,}",
                         kw.value.span, label="too many slices",
                         help="give the number of slices the job spans (each is a TPU slice "
                              "joined over the data-center network)")
                continue
            if v is not None:
                counts[n] = v
        return Mesh(tuple(MeshAxis(a.name, a.size, a.span, counts.get(a.name, 1))
                          for a in mesh.axes), mesh.span, statements.slices[0].span)

    def _axis_types(self, statements, mesh: Mesh) -> tuple[str, ...]:
        """Each axis's type in mesh order, or () when every axis is `auto`."""
        self._once(statements.axis_types, "`axis_types`")
        if not statements.axis_types:
            return ()
        stmt = statements.axis_types[0]
        if stmt.every is not None:
            every = self._axis_type(stmt.every)
            types = {n: every for n in mesh.names}
        else:
            types = {}
            seen: dict[str, ast.AxisTypeDecl] = {}
            for decl in stmt.axes:
                n = decl.name.text
                if n not in self._axis_set(mesh):
                    self._unknown_axis(decl.name, mesh)
                    continue
                if n in seen:
                    self.err("P102", f"axis `{n}` is given twice in `axis_types`",
                             decl.name.span, label="given again",
                             secondary=(Label(seen[n].name.span, "first given here"),),
                             help="give each axis one type")
                    continue
                seen[n] = decl
                types[n] = self._axis_type(decl.type)
        out = tuple(types.get(n, "auto") for n in mesh.names)
        return () if all(t == "auto" for t in out) else out

    def _axis_type(self, node) -> str:
        if isinstance(node, ast.Auto):
            return "auto"
        word = node.text
        if word in ("auto", "explicit"):
            return word
        if word.lower() in ("auto", "explicit"):
            help_text = f"write `{word.lower()}`"
        elif word.lower() == "manual":
            help_text = ("`manual` axes exist only inside `jax.shard_map`; the mesh's "
                         "axes are `auto` or `explicit` (use `plan.shard_map`)")
        else:
            help_text = self._hint(word, ("auto", "explicit")) or "choose `auto` or `explicit`"
        self.err("P127", f"unknown axis type `{word}`", node.span, label="not an axis type",
                 help=help_text)
        return "auto"

    def _distribution(self, statements):
        self._once(statements.distribution, "distribution (`data_parallel` or `model_parallel`)")
        if not statements.distribution:
            first = next(iter(statements.mesh or statements.layout or statements.params
                              or statements.plan), None)
            self.err("P114", "the plan declares no distribution", first.span if first else
                     Span.start_of(self.file), label="expected `data_parallel` or "
                     "`model_parallel(batch = ...)` in this plan",
                     help="add `data_parallel` (replicate every variable) or "
                          "`model_parallel(batch = AXIS)`")
            return "model_parallel", None
        stmt = statements.distribution[0]
        if isinstance(stmt, ast.DataParallelStmt):
            return "data_parallel", stmt
        return "model_parallel", stmt

    def _batch_axes(self, stmt, distribution, mesh: Mesh) -> tuple[str, ...]:
        if distribution == "data_parallel" or stmt is None:
            return mesh.names
        if stmt.key is None:  # bare `model_parallel`: the first axis, as Keras defaults
            return mesh.names[:1]
        if stmt.key.text != "batch":
            self.err("P119", f"`model_parallel` takes `batch = AXES`, not `{stmt.key.text}`",
                     stmt.key.span, label="unknown setting", help="write `batch = AXIS`")
        out: dict[str, None] = {}  # ordered, and `in` is O(1) for a batch of many axes
        for n in stmt.axes:
            if n.text not in self._axis_set(mesh):
                hint = self._hint(n.text, mesh.names)
                self.err("P113", f"batch axis `{n.text}` is not a mesh axis", n.span,
                         label="not in the mesh", help=hint or "the mesh axes are " +
                         listing(mesh.names))
            elif n.text in out:
                self.err("P104", f"batch axis `{n.text}` is named twice", n.span,
                         label="named again")
            else:
                out[n.text] = None
        return tuple(out)

    def _mode(self, stmts, what, choices, default) -> str:
        self._once(stmts, f"`{what}`")
        if not stmts:
            return default
        mode = stmts[0].mode
        if mode.text not in choices:
            self.err("P119", f"unknown `{what}` mode `{mode.text}`", mode.span,
                     label="not a mode", help=self._hint(mode.text, choices) or
                     "choose " + " or ".join(f"`{c}`" for c in choices))
            return default
        return mode.text

"""Statements -> Plan IR: every declaration-level problem, in one pass.

The problems are those the README's language reference describes, and its Diagnostics
section lists. The checker never stops at the first problem: it collects every
diagnostic, then raises `PlanError` if any is an error. It reads no files: the
statements come from `planc.syntax.includes`, includes already inlined.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from planc.syntax import ast
from planc import limits
from planc.diagnostics import Diagnostic, Label, PlanError, Span, error, warning
from planc.check.conditions import evaluate_check, sizes_env
from planc.check.expression import encode, names_in
from planc.check.overlaps import overlap_findings
from planc.ir import (Alternative, Budget, Check, Cluster, Dim, Layout, Mesh, MeshAxis, PlanIR,
                      Rename, Rule, Setting, layout_text)
from planc.matching import check_pattern, nesting_too_deep
from planc.multihost.environments import DETECT_METHODS
from planc.matching.backtracking import exponential
from planc.matching.templates import TemplateProblem, compile_template, pattern_groups
from planc.syntax.files import read_plan_text
from planc.syntax.includes import Collected, Statements, collect
from planc.diagnostics.did_you_mean import did_you_mean


def check(text: str, file: str = "<string>", overrides: dict | None = None, *,
          allow_include_outside: bool = False) -> PlanIR:
    """Parse and check plan text into a `PlanIR`, or raise `PlanError` with every problem.

    `overrides` maps parameter names to values: `int` or `str` from Python, `str` from
    `-D NAME=VALUE`.
    """
    collected = collect(text, file, allow_include_outside=allow_include_outside)
    return check_statements(collected, overrides)


def check_file(path: str | os.PathLike, overrides: dict | None = None, *,
               allow_include_outside: bool = False) -> PlanIR:
    """Read and check a plan file into a `PlanIR`: `OSError` when it cannot be read,
    `PlanError` with every problem inside it (P009 for text that is not a plan file's)."""
    return check(read_plan_text(path), os.fspath(path), overrides,
                 allow_include_outside=allow_include_outside)


def check_statements(collected: Collected, overrides: dict | None = None) -> PlanIR:
    """The `PlanIR` of a plan already read (`planc.syntax.includes.collect`), or `PlanError`.

    The diagnostics found reading the plan's files are reported with the checker's.
    """
    return _Checker(collected.file, overrides or {}).run(collected)


_CLUSTER_KEYS = ("coordinator", "processes", "process_id", "detect")
# The two patterns below are compiled by `re` when first used (few plans need them), not
# on every import.
# `package.module:attr`, as `planc.sources` reads a model source that imports a module.
_MODULE_ATTR = r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*"
# An integer override as the plan writes integers (ASCII digits, `_` between them).
_OVERRIDE_INT = r"-?[0-9]+(?:_[0-9]+)*"


class _Checker:
    """One plan's statements -> IR, gathering every diagnostic on the way."""

    def __init__(self, file: str, overrides: dict):
        self.file = file
        self.overrides = dict(overrides)
        self.diags: list[Diagnostic] = []
        self._mesh_names: tuple = (None, frozenset())
        self._scan_budget, self._cell_budget = _HINT_SCANS, _HINT_CELLS

    # -- driver -------------------------------------------------------------------------

    def run(self, collected: Collected) -> PlanIR:
        self.diags.extend(collected.diagnostics)
        sources = collected.sources
        ir = self._build(collected.statements)
        diags = tuple(sorted(self.diags, key=Diagnostic.sort_key))
        if any(d.is_error for d in diags):
            raise PlanError(diags, dict(sources))
        return ir._replace(diagnostics=diags, sources=tuple(sorted(sources.items())))

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

    # -- building the IR ------------------------------------------------------------------

    def _build(self, statements: Statements) -> PlanIR:
        name = self._plan_name(statements)
        params = self._params(statements)
        distribution, dist_stmt = self._distribution(statements)
        mesh = self._mesh(statements, params, distribution)
        axis_names = set(mesh.names)
        for pname, (stmt, _) in params.items():
            if pname in axis_names:
                self.err("P121", f"`{pname}` is both a parameter and a mesh axis", stmt.name.span,
                         label="parameter declared here", help="rename the parameter, e.g. "
                         f"`{pname}_size`; in a `check`, an axis name stands for its size")
        mesh = self._slices(statements, params, mesh)
        axis_types = self._axis_types(statements, mesh)
        batch_axes = self._batch_axes(dist_stmt, distribution, mesh)
        match = self._mode(statements.match, "match", ("full", "search"), "full")
        overlap = self._mode(statements.overlap, "overlap", ("error", "first"), "error")
        # Counted before any pattern is compiled, so a flood of rules costs no regex work.
        every = [r for section in statements.layout + statements.outputs + statements.rename
                 for r in section.rules]
        if len(every) > limits.MAX_RULES:
            self.err("P125", f"{len(every)} rules (limit {limits.MAX_RULES})",
                     every[limits.MAX_RULES].span, label="one rule too many")
            rules, default, outputs, outputs_default, renames = (), None, (), None, ()
        else:
            rules, default = self._rules(statements.layout, mesh, "layout", distribution)
            outputs, outputs_default = self._rules(statements.outputs, mesh, "outputs",
                                                   distribution)
            renames = self._renames(statements.rename)
            for block in (rules, outputs):
                self.diags.extend(overlap_findings(block, match, overlap))
        budget = self._budget(statements, params)
        checks = self._checks(statements, params, mesh)
        cluster = self._cluster(statements, params)
        model, model_span = self._model(statements)
        return PlanIR(
            name=name, file=self.file,
            params=tuple((k, v) for k, (_, v) in params.items()),
            mesh=mesh, distribution=distribution, batch_axes=batch_axes, match=match,
            overlap=overlap, rules=rules, default=default, outputs=outputs,
            outputs_default=outputs_default, renames=renames, budget=budget, checks=checks,
            cluster=cluster, axis_types=axis_types,
            axis_types_span=statements.axis_types[0].span if statements.axis_types else None,
            layout_span=_header(statements.layout[0]) if statements.layout else None,
            rename_span=_header(statements.rename[0], "rename") if statements.rename else None,
            model=model, model_span=model_span,
        )

    def _model(self, statements) -> tuple[str | None, Span | None]:
        """`model "PATH"`, resolved against the directory of the file that says it."""
        self._once(statements.model, "`model`")
        if not statements.model:
            return None, None
        stmt = statements.model[0]
        path = stmt.path.value
        if not path.strip():
            self.err("P133", "`model` names no model", stmt.path.span, label="empty",
                     help='write the model source, relative to this file: '
                     '`model "models/gemma_2b.json"`')
            return None, None
        if re.fullmatch(_MODULE_ATTR, path):
            # Linting a plan must not run code the plan names; a project's own
            # configuration (pyproject.toml) or the command line may.
            self.err("P134", f"a plan cannot name the module `{path}` as its model",
                     stmt.path.span, label="would run this module's code",
                     help="give the model as a file (checkpoint, manifest, config) or map "
                     "this plan to it in `[tool.planc]` of pyproject.toml, or pass --model")
            return None, None
        base = stmt.span.file
        here = os.path.dirname(base) if base not in ("<string>", "") else ""
        return os.path.normpath(os.path.join(here, path)), stmt.span

    def _once(self, stmts: list, what: str) -> None:
        for extra in stmts[1:]:
            self.err("P114", f"{what} is given more than once", extra.span,
                     label="repeated here", secondary=(Label(stmts[0].span, "first given here"),),
                     help=f"a plan has at most one {what}")

    def _plan_name(self, statements) -> str:
        self._once(statements.plan, "`plan` name")
        if statements.plan:
            return statements.plan[0].name.text
        stem = Path(self.file).stem
        return stem if self.file not in ("<string>", "") else "plan"

    # params -------------------------------------------------------------------------------

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

    # mesh -------------------------------------------------------------------------------------

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

    def _unknown_axis(self, name: ast.Name, mesh: Mesh, what="mesh axis") -> None:
        if name.text == "None":
            self.err("P008", "`None` is Python; planc writes `_` for a dimension that is not split",
                     name.span, label="write `_` here", help="replace `None` with `_`")
            return
        hint = self._hint(name.text, mesh.names)
        self.err("P101", f"unknown {what} `{name.text}`", name.span, label="not in the mesh",
                 help=hint or f"the mesh axes are {_listing(mesh.names)}")

    # distribution ---------------------------------------------------------------------------

    def _distribution(self, statements):
        self._once(statements.distribution, "distribution (`data_parallel` or `model_parallel`)")
        if not statements.distribution:
            first = next(iter(statements.mesh or statements.layout or statements.params
                              or statements.plan), None)
            self.err("P114", "the plan declares no distribution", first.span if first else
                     Span(self.file, 1, 1, 1, 2), label="expected `data_parallel` or "
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
                         _listing(mesh.names))
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

    # rules --------------------------------------------------------------------------------

    def _rules(self, sections, mesh, kind, distribution):
        rules: list[Rule] = []
        default: Rule | None = None
        default_stmt = None
        seen: dict[str, ast.PatternRule] = {}
        for section in sections:
            if distribution == "data_parallel" and section.rules:
                self.err("P115", f"a `{kind}` block under `data_parallel`", section.span,
                         label="these rules would never apply",
                         help="`data_parallel` replicates every variable; use "
                              "`model_parallel(batch = ...)` to lay variables out")
            for r in section.rules:
                layout = self._layout(r.layout, mesh)
                if isinstance(r, ast.DefaultRule):
                    if default_stmt is not None:
                        self.err("P123", f"`default` is given twice in `{kind}`", r.keyword,
                                 label="second default",
                                 secondary=(Label(default_stmt.keyword, "first default here"),))
                        continue
                    default_stmt = r
                    default = Rule(-1, None, layout, r.span, r.keyword)
                    continue
                pat = r.pattern
                if pat.value in seen:
                    self.err("P111", f"duplicate rule for \"{pat.raw}\"", pat.span,
                             label="repeated pattern",
                             secondary=(Label(seen[pat.value].pattern.span, "first rule here"),),
                             help="remove one of them (Keras refuses duplicate keys too)")
                    continue
                seen[pat.value] = r
                self._pattern(pat)
                rules.append(Rule(len(rules), pat.value, layout, r.span, pat.span, pat.raw))
        return tuple(rules), default

    def _pattern(self, pat: ast.StrLit) -> bool:
        """Whether `pat` is a pattern the matcher can run; a diagnostic when it is not."""
        deep = nesting_too_deep(pat.value, limits.MAX_PATTERN_NESTING)
        if deep is not None:
            col = 1 + _raw_offset(pat.raw, deep)
            self.err("P125", f"pattern nests groups more than {limits.MAX_PATTERN_NESTING} deep "
                     f"(limit {limits.MAX_PATTERN_NESTING})", pat.span.shifted(col, 1),
                     label="too deeply nested", secondary=(Label(pat.span, "in this pattern"),))
            return False
        try:
            problem = check_pattern(pat.value)
        except RecursionError:  # called from deep in someone's stack: still no traceback
            self.err("P125", "pattern nested too deeply to compile", pat.span,
                     label="too deeply nested")
            return False
        if problem is None:
            if exponential(pat.value):
                self.diags.append(warning(
                    "P314", "pattern may take exponential time in Python's `re`: it can "
                    "match one text in exponentially many ways", pat.span,
                    label="a backtracking engine tries each way",
                    help=("planc itself matches in linear time, but the emitted modules and "
                          "Keras's LayoutMap use Python's `re`, and `planc compile` refuses "
                          "the pattern; make each repetition match one way, e.g. "
                          "`(\\w+_?)+` as `\\w+(_\\w+)*`")))
            return True
        col = 1 + _raw_offset(pat.raw, problem.offset)
        span = pat.span.shifted(col, 1)
        if problem.kind == "invalid":
            self.err("P106", f"invalid regular expression: {problem.message}", span,
                     label="here", secondary=(Label(pat.span, "in this pattern"),))
        else:
            self.err("P107", f"unsupported regular expression feature: {problem.message}", span,
                     label="not supported", help="planc matches with RE2 (linear time); "
                     "rewrite the pattern without backreferences or lookaround")
        return False

    # rename -------------------------------------------------------------------------------

    def _renames(self, sections) -> tuple[Rename, ...]:
        """The `rename` blocks' rules in file order: their patterns checked as layout
        patterns are (one engine answers both), their templates against the groups."""
        out: list[Rename] = []
        seen: dict[str, ast.RenameRule] = {}
        for section in sections:
            for r in section.rules:
                transpose = self._rename_options(r)
                pat = r.pattern
                if pat.value in seen:
                    self.err("P111", f"duplicate rename rule for \"{pat.raw}\"", pat.span,
                             label="repeated pattern",
                             secondary=(Label(seen[pat.value].pattern.span, "first rule here"),),
                             help="the first rule always wins; remove the other")
                    continue
                seen[pat.value] = r
                if self._pattern(pat):
                    self._template(r.template, pat)
                out.append(Rename(len(out), pat.value, r.template.value, transpose, r.span,
                                  pat.span))
        return tuple(out)

    def _rename_options(self, r: ast.RenameRule) -> bool:
        transpose = None
        for option in r.options:
            if option.text != "transpose":
                self.err("P119", f"unknown rename option `{option.text}`", option.span,
                         label="unknown", help=self._hint(option.text, ("transpose",)) or
                         "a rename rule takes one option, `transpose` (2-D tensors only)")
            elif transpose is not None:
                self.err("P119", "`transpose` is given twice", option.span, label="given again",
                         secondary=(Label(transpose.span, "first given here"),))
            else:
                transpose = option
        return transpose is not None

    def _template(self, template: ast.StrLit, pat: ast.StrLit) -> None:
        try:
            regex = pattern_groups(pat.value)
        except (re.error, RecursionError, OverflowError) as exc:  # check_pattern passed it
            self.err("P125", f"pattern too large for Python's re to read its groups: {exc}",
                     pat.span, label="in this pattern")
            return
        try:
            compile_template(template.value, regex)
        except TemplateProblem as problem:
            col = 1 + _raw_offset(template.raw, problem.offset)
            end = 1 + _raw_offset(template.raw, problem.offset + problem.length)
            span = template.span.shifted(col, max(end - col, 1)) if problem.length else template.span
            self.err("P126", f"bad rename template: {problem.message}", span,
                     label="here", secondary=(Label(pat.span, "the pattern"),),
                     help=r"a template names the pattern's groups as `\1` or `\g<name>`")

    def _layout(self, node: ast.LayoutExpr, mesh: Mesh) -> Layout:
        alternatives = node.alternatives
        if len(alternatives) == 1:  # most rules: no `|`
            alt = self._alternative(alternatives[0], mesh)
            return Layout((alt,), layout_text(alt), node.span)
        alts = tuple(self._alternative(a, mesh) for a in alternatives)
        return Layout(alts, " | ".join(layout_text(a) for a in alts), node.span)

    def _alternative(self, node, mesh: Mesh) -> Alternative:
        if node.__class__ is ast.Replicated:
            return Alternative((), replicated=True, span=node.span)
        head: list[Dim] = []
        tail: list[Dim] = []
        dims = head  # `tail` once `...` is read
        ellipsis: ast.Ellipsis | None = None
        used: dict[str, ast.Name] = {}
        axes = self._axis_set(mesh)
        for entry in node.entries:
            kind = entry.__class__
            if kind is ast.Unsplit:
                dims.append(Dim((), 1, entry.span))
                continue
            if kind is ast.Ellipsis:
                if ellipsis is not None:
                    self.err("P105", "`...` appears twice in one layout", entry.span,
                             label="second `...`",
                             secondary=(Label(ellipsis.span, "first `...` here"),),
                             help="`...` stands for as many `_` as needed; use it once")
                ellipsis = entry
                dims = tail
                continue
            names = []
            for n in entry.axes:
                text = n.text
                if text in axes and text not in used:
                    used[text] = n
                elif text not in axes:
                    self._unknown_axis(n, mesh)
                else:
                    self.err("P104", f"axis `{text}` is used twice in one layout", n.span,
                             label="used again",
                             secondary=(Label(used[text].span, "first used here"),),
                             help="a mesh axis can split at most one dimension of a variable")
                names.append(text)
            if entry.block is None:  # most splits
                dims.append(Dim(tuple(names), 1, entry.span))
                continue
            block = entry.block.value
            if block <= 0:
                self.err("P112", f"block size must be a positive integer, not {block}",
                         entry.block.span, label="not positive")
                block = 1
            dims.append(Dim(tuple(names), block, entry.span))
        return Alternative(tuple(head), ellipsis is not None, tuple(tail), False, node.span)

    # budget, checks, cluster -------------------------------------------------------------------

    def _budget(self, statements, params) -> Budget | None:
        self._once(statements.budget, "`budget`")
        if not statements.budget:
            return None
        stmt = statements.budget[0]
        per_device, state, peak = None, 1, None
        for kw in stmt.args:
            key = kw.name.text
            if key == "per_device":
                per_device = self._int_value(kw.value, params, "`per_device`")
            elif key == "state":
                state = self._int_value(kw.value, params, "`state`") or 1
            elif key == "peak":
                peak = self._int_value(kw.value, params, "`peak`")
            else:
                self.err("P119", f"unknown budget setting `{key}`", kw.name.span,
                         label="unknown", help=self._hint(key, ("per_device", "state", "peak"))
                         or "budget takes `per_device = SIZE`, `peak = SIZE` and `state = K`")
        if per_device is None and peak is None:
            if not any(kw.name.text in ("per_device", "peak") for kw in stmt.args):
                self.err("P119", "`budget` needs `per_device = SIZE` or `peak = SIZE`",
                         stmt.span, label="no size",
                         help="e.g. `budget(per_device = 80 GB)`, or `budget(peak = 16 GiB)` "
                         "for the compiled step's peak (`planc aot`)")
            return None
        return Budget(per_device, state, stmt.span, peak)

    def _checks(self, statements, params, mesh: Mesh) -> tuple[Check, ...]:
        out = []
        env = sizes_env(dict((k, v) for k, (_, v) in params.items()), mesh)
        for stmt in statements.checks:
            names = []
            ok = self._check_names(stmt.expr, params, mesh, names)
            if not ok:
                continue
            check = Check(encode(stmt.expr), stmt.message.value,
                          tuple(dict.fromkeys(names)), stmt.span)
            out.append(check)
            if all(n in env for n in check.names):
                self._evaluate(check, env)
        return tuple(out)

    def _check_names(self, expr, params, mesh, names) -> bool:
        ok = True
        for n in names_in(expr):
            if n.text in self._axis_set(mesh):
                names.append(n.text)
            elif n.text in params:
                if not isinstance(params[n.text][1], int):
                    self.err("P122", f"parameter `{n.text}` is a string; `check` compares integers",
                             n.span, label="a string parameter")
                    ok = False
                names.append(n.text)
            else:
                hint = self._hint(n.text, params, mesh.names)
                self.err("P108", f"unknown name `{n.text}` in `check`", n.span,
                         label="neither a parameter nor a mesh axis",
                         help=hint or "a `check` reads parameters and mesh axis sizes")
                ok = False
        return ok

    def _evaluate(self, check: Check, env: dict) -> None:
        problem = evaluate_check(check, env)
        if problem:
            self.diags.append(problem)


    def _cluster_setting(self, kw: ast.KwArg, params) -> Setting | None:
        v = kw.value
        if isinstance(v, ast.EnvCall):
            default = None
            if v.default is not None:
                default = self._literal(v.default, params)
            return Setting(default, v.var.value, v.span)
        value = self._literal(v, params)
        return Setting(value, None, v.span)


    def _literal(self, v, params):
        if isinstance(v, (ast.IntLit, ast.SizeLit, ast.StrLit)):
            return v.value
        if isinstance(v, ast.Name):
            if v.text in params:
                return params[v.text][1]
            self.err("P108", f"unknown parameter `{v.text}`", v.span, label="not declared",
                     help=self._hint(v.text, params))
            return None
        self.err("P110", "`env(...)` cannot be nested", v.span, label="nested env")
        return None


    def _cluster(self, statements, params) -> Cluster | None:
        self._once(statements.cluster, "`cluster`")
        if not statements.cluster:
            return None
        stmt = statements.cluster[0]
        values: dict[str, Setting] = {}
        detect = "auto"
        for kw in stmt.args:
            key = kw.name.text
            if key == "detect" and "detect" not in values:
                detect = self._cluster_detect(kw) or detect
                values["detect"] = Setting(detect, None, kw.value.span)
                continue
            if key not in _CLUSTER_KEYS:
                self.err("P119", f"unknown cluster setting `{key}`", kw.name.span, label="unknown",
                         help=self._hint(key, _CLUSTER_KEYS) or
                         "cluster takes " + ", ".join(f"`{k}`" for k in _CLUSTER_KEYS))
                continue
            if key in values:
                self.err("P114", f"cluster setting `{key}` is given twice", kw.name.span,
                         label="given again")
                continue
            setting = self._cluster_setting(kw, params)
            if setting is not None:
                if key != "coordinator" and setting.value is not None and not isinstance(setting.value, int):
                    self.err("P110", f"cluster setting `{key}` must be an integer", kw.value.span,
                             label="not an integer")
                values[key] = setting
        return Cluster(values.get("coordinator"), values.get("processes"), values.get("process_id"),
                       stmt.span, detect=detect)

    def _cluster_detect(self, kw: ast.KwArg) -> str | None:
        """`detect = "NAME"`: one of the environments planc and JAX know, else P130."""
        if isinstance(kw.value, ast.StrLit) and kw.value.value in DETECT_METHODS:
            return kw.value.value
        given = kw.value.value if isinstance(kw.value, ast.StrLit) else None
        self.err("P130", f"unknown cluster environment {given!r}" if given is not None
                 else "`detect` takes a quoted environment name", kw.value.span,
                 label="not an environment planc knows",
                 help=(self._hint(given, DETECT_METHODS) if given else None) or
                 "detect = one of " + ", ".join(f'"{m}"' for m in DETECT_METHODS))
        return None


# What suggestions may cost one check: choices looked at, and edit-distance cells.
_HINT_SCANS = 1_000_000
_HINT_CELLS = 1_000_000


def _listing(names, limit: int = 10) -> str:
    """`a`, `b`, ... for a help line, the first `limit` names and a count of the rest."""
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _header(section, keyword: str = "layout") -> Span:
    """The keyword of a section, so a diagnostic does not underline all of it."""
    s = section.span
    return Span(s.file, s.line, s.column, s.line, s.column + len(keyword))



def _raw_offset(raw: str, value_offset: int) -> int:
    """Where character `value_offset` of an unescaped pattern sits in the raw string."""
    r = v = 0
    while v < value_offset and r < len(raw):
        r += 2 if raw.startswith('\\"', r) else 1
        v += 1
    return r



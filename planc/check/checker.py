"""Statements -> Plan IR: every declaration-level problem, in one pass.

The problems are those the language reference (docs/language.md) describes, and its Diagnostics
section lists. The checker never stops at the first problem: it collects every
diagnostic, then raises `PlanError` if any is an error. It reads no files: the
statements come from `planc.syntax.includes`, includes already inlined.

The checker is one object in parts, each a module by the job it does: `base` (what every
part shares), `declarations` (params, mesh, distribution, modes), `rules` (layout,
outputs and rename blocks), `axes` (the logical-name table), `stages` (the pipeline)
and `settings` (budget, checks, cluster); this module drives
them and assembles the IR.
"""

from __future__ import annotations

import os

from planc import limits
from planc.check.axes import LogicalAxes
from planc.check.declarations import Declarations
from planc.check.overlaps import overlap_findings
from planc.check.rules import Rules
from planc.check.settings import Settings
from planc.check.stages import StagesChecker
from planc.diagnostics import Diagnostic, PlanError, Span, warning
from planc.ir import PlanIR
from planc.sources.module_attr import is_module_attr
from planc.syntax.files import path_stem, read_plan_text
from planc.syntax.includes import Collected, Statements, collect


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


# `package.module:attr`, as `planc.sources` reads a model source that imports a module;
# compiled by `re` when first used (few plans need it), not on every import.


class _Checker(Declarations, LogicalAxes, Rules, Settings, StagesChecker):
    """One plan's statements -> IR, gathering every diagnostic on the way."""

    def run(self, collected: Collected) -> PlanIR:
        self.diags.extend(collected.diagnostics)
        sources = collected.sources
        ir = self._build(collected.statements)
        diags = tuple(sorted(self.diags, key=Diagnostic.sort_key))
        if any(d.is_error for d in diags):
            raise PlanError(diags, dict(sources))
        return ir._replace(diagnostics=diags, sources=tuple(sorted(sources.items())))

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
        self.ir_table = self._logical_axes(statements, mesh)
        match = self._mode(statements.match, "match", ("full", "search"), "full")
        overlap = self._mode(statements.overlap, "overlap", ("error", "first"), "error")
        # Counted before any pattern is compiled, so a flood of rules costs no regex work.
        every = [r for section in (statements.layout + statements.state + statements.outputs
                                   + statements.rename) for r in section.rules]
        if len(every) > limits.MAX_RULES:
            self.err("P125", f"{len(every)} rules (limit {limits.MAX_RULES})",
                     every[limits.MAX_RULES].span, label="one rule too many")
            rules, default, outputs, outputs_default, renames = (), None, (), None, ()
            state, state_default = (), None
        else:
            rules, default = self._rules(statements.layout, mesh, "layout", distribution)
            state, state_default = self._rules(statements.state, mesh, "state", distribution)
            outputs, outputs_default = self._rules(statements.outputs, mesh, "outputs",
                                                   distribution)
            renames = self._renames(statements.rename)
            for block in (rules, state, outputs):
                self.diags.extend(overlap_findings(block, match, overlap))
        budget = self._budget(statements, params)
        if budget is not None and budget.host is not None:
            self._host_budget_used(budget, (*rules, default, *state, state_default))
        checks = self._checks(statements, params, mesh)
        stages = self._stages(statements, params, mesh)
        if budget is not None and budget.imbalance is not None and stages is None \
                and not statements.stages:
            self.diags.append(warning(
                "P164", "`imbalance` bounds pipeline stages, and this plan has no `stages`",
                budget.imbalance_span, label="nothing to bound",
                help="add `stages(AXIS, microbatches = N) { ... }`, or remove `imbalance =`"))
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
            model=model, model_span=model_span, state=state, state_default=state_default,
            state_span=_header(statements.state[0], "state") if statements.state else None,
            logical_axes=self.ir_table, stages=stages,
            logical_span=_header(statements.axes[0], "axes") if statements.axes else None,
        )

    def _host_budget_used(self, budget, rules) -> None:
        """P141 when `budget(host = ...)` bounds host memory that no variable rule uses."""
        if any(r is not None and r.layout.host for r in rules):
            return
        self.diags.append(warning(
            "P141", "`host` budgets host memory, but no `layout` or `state` rule places "
            "anything there", budget.host_span or budget.span, label="nothing to count",
            help="write `on host` after the layout of the variables or optimizer slots to "
                 "keep in pinned host memory, or remove `host =`"))

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
        if is_module_attr(path):
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

    def _plan_name(self, statements) -> str:
        self._once(statements.plan, "`plan` name")
        if statements.plan:
            return statements.plan[0].name.text
        stem = path_stem(self.file)
        return stem if self.file not in ("<string>", "") else "plan"


def _header(section, keyword: str = "layout") -> Span:
    """The keyword of a section, so a diagnostic does not underline all of it."""
    s = section.span
    return Span(s.file, s.line, s.column, s.line, s.column + len(keyword))

"""`planc lint`: the language checks, and validation against a model when one is given."""

from __future__ import annotations

from planc.check.binding import bind
from planc.diagnostics import Diagnostic, note, unique

Sources = dict


def lint_plans(paths, defines: dict, counts: list[int], variables=None, *,
               allow_include_outside: bool = False, progress: bool = False
               ) -> tuple[list[Diagnostic], Sources, list[str]]:
    """Every diagnostic for `paths`, checked at each device count in `counts`, and a
    one-line reason for each path that could not be read (the others are still linted).

    With `variables` (a model's variables), each plan is validated against them; without,
    only what the plan says on its own is checked. A plan with `auto` and no count is
    checked for everything that does not depend on the device count, and a P202 note
    says what was skipped.
    """
    from planc.cli.common import UsageError, load

    diags: list[Diagnostic] = []
    sources: Sources = {}
    unreadable: list[str] = []
    for path in paths:
        try:
            plan, found, srcs = load(path, defines, allow_include_outside)
        except UsageError as exc:
            unreadable.append(str(exc))
            continue
        sources.update(srcs)
        diags += found
        if plan is None:
            continue
        if variables is not None:
            from planc.resolve.validate import validate

            for n in counts or [None]:
                diags += validate(plan, variables, n, progress=progress).diagnostics
            continue
        diags += _device_checks(plan, counts)
    return unique(diags), sources, unreadable


def _device_checks(plan, counts: list[int]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for n in counts:
        out += bind(plan.ir, n).problems
    if not counts and plan.device_count is None:
        auto = plan.ir.mesh.auto_axis
        for check in plan.ir.checks:
            if auto.name in check.names:
                out.append(note("P202", f"check not evaluated: it reads `{auto.name}`, whose "
                                "size is `auto`", check.span, label="skipped",
                                help="pass --devices N to evaluate it"))
    return out


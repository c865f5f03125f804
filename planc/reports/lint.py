"""Lint over plans x device counts: the plans' own checks, and validation against a model
when one is given. `planc lint` renders what this returns."""

from __future__ import annotations


from planc.check.binding import bind
from planc.check.checker import check_file
from planc.diagnostics import Diagnostic, PlanError, note, unique
from planc.fileio import os_error_text
from planc.ir import PlanIR


def lint_plans(paths, defines: dict, counts: list[int], variables=None, *,
               allow_include_outside: bool = False, progress: bool = False
               ) -> tuple[list[Diagnostic], dict[str, str], list[str]]:
    """Every diagnostic for `paths`, checked at each device count in `counts`, the source
    text of every file they quote, and a one-line reason for each path that could not be
    read (the others are still linted).

    With `variables` (a model's variables), each plan is validated against them; without,
    only what the plan says on its own is checked. A plan with `auto` and no count is
    checked for everything that does not depend on the device count, and a P202 note
    says what was skipped.
    """
    diags: list[Diagnostic] = []
    sources: dict[str, str] = {}
    unreadable: list[str] = []
    for path in paths:
        try:
            ir, found, srcs = _read(path, defines, allow_include_outside)
        except OSError as exc:
            unreadable.append(f"cannot read {path}: {os_error_text(exc)}")
            continue
        sources.update(srcs)
        diags += found
        if ir is None:
            continue
        if variables is not None:
            from planc.resolve import validate

            for n in counts or [None]:
                diags += validate(ir, variables, n, progress=progress).diagnostics
            continue
        diags += _device_checks(ir, counts)
    return unique(diags), sources, unreadable


def _read(path: str, defines: dict, allow_include_outside: bool):
    """(IR or None, diagnostics, sources) for one plan file; OSError if unreadable."""
    try:
        ir = check_file(path, defines, allow_include_outside=allow_include_outside)
    except PlanError as exc:
        return None, list(exc.diagnostics), exc.sources
    return ir, list(ir.diagnostics), ir.source_dict


def _device_checks(ir: PlanIR, counts: list[int]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for n in counts:
        out += bind(ir, n).problems
    if not counts and ir.mesh.device_count is None:
        auto = ir.mesh.auto_axis
        for c in ir.checks:
            if auto.name in c.names:
                out.append(note("P202", f"check not evaluated: it reads `{auto.name}`, whose "
                                "size is `auto`", c.span, label="skipped",
                                help="pass --devices N to evaluate it"))
    return out

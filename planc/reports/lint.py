"""Lint over plans x device counts: the plans' own checks, validation against a model
when one is given, and a checkpoint's tensors against the plan's `rename` rules (and the
model) when a checkpoint is. `planc lint` renders what this returns."""

from __future__ import annotations

from planc.checkpoints.binding import bind_checkpoint
from planc.checkpoints.tensors import CheckpointError, Tensor, open_checkpoint

from planc.check.binding import bind
from planc.check.checker import check_file
from planc.diagnostics import Diagnostic, PlanError, note, unique
from planc.fileio import os_error_text
from planc.ir import PlanIR


def lint_plans(paths, defines: dict, counts: list[int], variables=None, *,
               allow_include_outside: bool = False, progress: bool = False,
               checkpoint=None, strict: bool = False
               ) -> tuple[list[Diagnostic], dict[str, str], list[str]]:
    """Every diagnostic for `paths`, checked at each device count in `counts`, the source
    text of every file they quote, and a one-line reason for each path that could not be
    read (the others are still linted).

    With `variables` (a model's variables), each plan is validated against them; without,
    only what the plan says on its own is checked. A plan with `auto` and no count is
    checked for everything that does not depend on the device count, and a P202 note
    says what was skipped. With `checkpoint` (a path), its tensors are bound to each
    plan as `plan.load` would bind them (`planc.checkpoints.binding`), from headers
    alone: to `variables` when given, else only the `rename` rules are checked against
    the tensors' names. `strict` makes a tensor no variable takes an error.
    """
    diags: list[Diagnostic] = []
    sources: dict[str, str] = {}
    unreadable: list[str] = []
    tensors = None
    if checkpoint is not None:
        try:
            tensors = checkpoint_tensors(checkpoint)
        except CheckpointError as exc:
            if exc.unreadable:
                return [], {}, [str(exc)]
            diags.append(exc.diagnostic())
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
        if tensors is not None:
            diags += bind_checkpoint(ir, tensors, variables, strict=strict)[1]
        if variables is not None:
            from planc.resolve import validate

            for n in counts or [None]:
                diags += validate(ir, variables, n, progress=progress).diagnostics
            continue
        diags += _device_checks(ir, counts)
    return unique(diags), sources, unreadable


def checkpoint_tensors(path) -> tuple[Tensor, ...]:
    """The tensors of the checkpoint at `path`, from its headers; `CheckpointError` when it
    cannot be opened."""
    ckpt = open_checkpoint(path)
    try:
        return tuple(ckpt.tensors)
    finally:
        ckpt.close()


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

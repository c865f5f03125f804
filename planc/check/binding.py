"""Binding a plan to a device count: `auto` gets its size, and deferred `check`s run.

This is the one place planc binds a plan; the facade (`Plan.with_devices`), validation,
lint and the targets all call it.
"""

from __future__ import annotations

from planc import limits
from planc.check.conditions import evaluate_check, sizes_env
from planc.check.stages import TOO_MANY_STAGES_HELP, too_many_stages
from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.diagnostics.text import counted
from planc.frozen import Frozen
from planc.ir import Mesh, PlanIR

class Binding(Frozen):
    """What binding found: the bound IR (None when the mesh cannot take the count), and
    the problems (P201 for the mesh, P129 for a pipeline `auto` makes too long; P118 and
    P122 for `check`s that fail)."""

    ir: PlanIR | None
    problems: tuple[Diagnostic, ...] = ()


def bind(ir: PlanIR, devices: int) -> Binding:
    """`ir` on `devices` devices, never raising. When only `check`s fail, `ir` is still
    bound: the model can be validated beside the failed checks.

    >>> import planc
    >>> b = bind(planc.loads("mesh(batch = auto, model = 2)\\ndata_parallel").ir, 8)
    >>> b.ir.mesh.shape, b.problems
    ((4, 2), ())
    """
    if isinstance(devices, bool) or not isinstance(devices, int) or devices <= 0:
        return Binding(None, (error("P201", f"device count must be a positive integer, not "
                                    f"{devices!r}", ir.mesh.span),))
    mesh = _mesh_on(ir, devices)
    if isinstance(mesh, Diagnostic):
        return Binding(None, (mesh,))
    stages = ir.stages
    if stages is not None and mesh.auto_axis is None and ir.mesh.auto_axis is not None:
        count = stages.count(mesh)
        if count > limits.MAX_STAGES:
            auto = ir.mesh.auto_axis
            return Binding(None, (error(
                "P129", too_many_stages(stages.axis, mesh.size_of(stages.axis), stages.virtual)
                + f" at {devices:,} devices", auto.span or mesh.span, label="`auto` binds here",
                devices=devices, help=TOO_MANY_STAGES_HELP),))
    env = sizes_env(ir.param_dict, mesh)
    problems = tuple(p for c in ir.checks if (p := evaluate_check(c, env, devices)))
    if mesh is ir.mesh:
        return Binding(ir, problems)
    return Binding(ir._replace(mesh=mesh, written_mesh=ir.written_mesh or ir.mesh), problems)


def bind_devices(ir: PlanIR, devices: int) -> PlanIR:
    """`ir` with `auto` resolved for `devices` devices and its deferred checks run;
    raises `PlanError` when the count does not fit (P201) or a check fails."""
    if ir.mesh.auto_axis is None and ir.mesh.device_count == devices and not ir.checks:
        return ir
    binding = bind(ir, devices)
    if binding.ir is None or any(p.is_error for p in binding.problems):
        raise PlanError(binding.problems, ir.source_dict)
    return binding.ir


def _mesh_on(ir: PlanIR, devices: int) -> Mesh | Diagnostic:
    """The mesh over `devices` devices, or the P201 that says why it cannot be."""
    mesh = ir.mesh
    fixed = 1
    for a in mesh.axes:
        fixed *= a.global_size if a.size is not None else a.slices
    auto = mesh.auto_axis
    if auto is None and fixed == devices:
        return mesh
    if auto is not None and devices % fixed == 0 and devices >= fixed:
        size = devices // fixed
        return mesh._replace(axes=tuple(a._replace(size=size) if a is auto else a
                                        for a in mesh.axes))
    if auto is None:
        why = (f"the mesh needs exactly {counted(fixed, 'device')} ({_shape_text(mesh)}), "
               f"not {devices}")
    else:
        why = (f"{counted(devices, 'device')} cannot be split into {_shape_text(mesh)}: "
               f"{devices} is not a multiple of {fixed}")
    return error("P201", f"device count does not fit the mesh: {why}",
                 mesh.span or Span.start_of(ir.file), label="this mesh", devices=devices,
                 help=None if auto else "use `auto` for one axis to take the remaining devices")


def _shape_text(mesh: Mesh) -> str:
    parts = []
    for a in mesh.axes:
        size = "auto" if a.size is None else str(a.size)
        parts.append(f"{a.name}={size}" + (f"x{a.slices}" if a.slices > 1 else ""))
    return ", ".join(parts)

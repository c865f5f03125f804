"""The torch target: a plan as a `DeviceMesh`, DTensor placements, and an `nn.Module`
whose parameters are DTensors placed as the plan says.

Every layout comes from `planc.resolve.Resolver`, the one matching engine; this module
turns its answers into placements (`planc.targets.torch.placements`) and hands them to
DTensor (`planc.targets.torch.dtensor`, which says how the mesh is made and the module
distributed). The `Plan` facade calls these functions with its IR
(`plan.torch_mesh()`, `plan.torch_placements(path, shape)`,
`plan.distribute_module(module)`); each binds the IR to the job's process count, or to
the mesh it is given.

Errors first: a layout DTensor cannot express (P311), a process count the mesh does not
fit (P201), and every parameter without a valid layout (unmatched, ambiguous, a rank or
divisibility misfit) raise one `PlanError` before the process group starts or a
parameter moves.
"""

from __future__ import annotations

import math

from planc.check.binding import bind_devices
from planc.diagnostics import PlanError
from planc.ir import PlanIR
from planc.resolve import Resolver
from planc.targets.torch.dtensor import (_distribute, _init_mesh, _mesh_sizes, _parameters,
                                         _placements, _world_size)
from planc.targets.torch.placements import refuse_inexpressible
from planc.variables import Variable

__all__ = ["make_mesh", "placements", "distribute_module"]


def make_mesh(ir: PlanIR):
    """A `DeviceMesh` with the plan's axes over every process of the job (`auto` takes
    what the others leave); P201 when the process count does not fit the mesh."""
    bound = bind_devices(ir, _world_size())
    return _init_mesh(bound.mesh.shape, bound.mesh.names)


def _bound(ir: PlanIR, mesh) -> PlanIR:
    """`ir` bound to `mesh`'s size after checking it is the plan's mesh, or to the job's
    process count when `mesh` is None."""
    if mesh is None:
        return bind_devices(ir, _world_size())
    sizes = _mesh_sizes(mesh, ir.mesh.names)
    bound = bind_devices(ir, math.prod(sizes.values()))
    wrong = [f"`{a.name}` is {sizes[a.name]} in the mesh but {a.global_size} in the plan"
             for a in bound.mesh.axes if sizes[a.name] != a.global_size]
    if wrong:
        raise ValueError(f"the mesh does not match plan {ir.name!r}: " + "; ".join(wrong))
    return bound


def _shape(shape) -> tuple[int, ...]:
    try:
        out = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be a sequence of integers, not {shape!r}") from None
    if any(isinstance(d, bool) or not hasattr(d, "__index__") or d < 0 for d in out):
        raise ValueError(f"shape must hold non-negative integers, not {shape!r}")
    return tuple(int(d) for d in out)


def placements(ir: PlanIR, path: str, shape, mesh=None) -> list:
    """The `Shard(d)`/`Replicate()` placements, one per mesh axis, of parameter `path`
    of `shape`; `PlanError` when it has no valid layout."""
    if not isinstance(path, str):
        raise TypeError(f"path must be a string, not {type(path).__name__}")
    refuse_inexpressible(ir)
    bound = _bound(ir, mesh)
    layout = Resolver(bound).layout(Variable(path, _shape(shape)))
    return _placements(layout.axes, bound.mesh.names)


def distribute_module(ir: PlanIR, module, mesh=None):
    """`module` with every parameter a DTensor placed by the plan, in place; returns it.

    Without `mesh`, the plan's mesh over the job (`make_mesh`) is made once every
    parameter has resolved.
    """
    refuse_inexpressible(ir)
    bound = _bound(ir, mesh)
    params = _parameters(module)
    resolution = Resolver(bound).resolve_all(
        [Variable(name, tuple(int(d) for d in p.shape)) for name, p in params])
    errors = tuple(d for d in resolution.diagnostics if d.is_error)
    if errors:
        raise PlanError(errors, bound.source_dict)
    names = bound.mesh.names
    placed = {a.variable.path: _placements(a.layout.axes, names)
              for a in resolution.assignments}
    if mesh is None:
        mesh = _init_mesh(bound.mesh.shape, names)
    return _distribute(module, mesh, placed)

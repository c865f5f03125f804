"""The runtime of the module `planc compile --target torch` writes: its public functions.

The emitted module carries a verbatim copy of the section below, after the binding of
`planc.targets.emit.runtime.binding`, the resolver of `planc.targets.emit.runtime.resolve`,
`_mesh_dims` of `planc.targets.torch.placements` and the DTensor helpers of
`planc.targets.torch.dtensor`, and runs where planc is not installed. So the code there
uses only torch, `os`, `re`, the names imported here (which the emitted module carries
too) and the emitted module's constants, which stand here for a plan of one `auto`
axis, no rules and no default: every parameter is replicated. Writing a module reads
this file without running it (`planc.targets.emit.codegen`).
"""

from __future__ import annotations

from planc.targets.emit.runtime.binding import _bind
from planc.targets.emit.runtime.resolve import _resolve
from planc.targets.torch.dtensor import (_distribute, _init_mesh, _mesh_sizes, _parameters,
                                         _placements, _world_size)

PLAN_NAME = "runtime"
MESH_AXES: tuple = ("batch",)
RULES: tuple = ()
DEFAULT = None

# -- copied into emitted modules: runtime -------------------------------------------------


def mesh():
    """A torch DeviceMesh with the plan's axes over every process of the job, ranks in
    row-major mesh order (`auto` takes what the other axes leave). The device type is
    torch's accelerator, else cpu with gloo; the process group is started if it is not.
    ValueError when the job's process count does not fit the mesh."""
    sizes = _job_sizes()
    return _init_mesh(tuple(sizes[n] for n in MESH_AXES), MESH_AXES)


def _job_sizes():
    world = _world_size()
    try:
        return _bind(world)
    except ValueError as exc:
        raise ValueError(f"plan {PLAN_NAME!r} on a job of {world} processes (one device "
                         f"each): {exc}") from None


def _sizes(device_mesh):
    """Axis sizes of `device_mesh`, checked against the plan, or of the job when None."""
    if device_mesh is None:
        return _job_sizes()
    sizes = _mesh_sizes(device_mesh, MESH_AXES)
    total = 1
    for n in sizes.values():
        total *= n
    expected = _bind(total)
    wrong = [f"`{n}` is {sizes[n]} in the mesh but {expected[n]} in the plan"
             for n in MESH_AXES if sizes[n] != expected[n]]
    if wrong:
        raise ValueError("the mesh does not match the plan: " + "; ".join(wrong))
    return expected


def _shape_of(shape):
    shape = tuple(shape)
    for d in shape:
        if isinstance(d, bool) or not hasattr(d, "__index__") or d < 0:
            raise ValueError(f"shape must hold non-negative integers, not {shape!r}")
    return tuple(int(d) for d in shape)


def placements(path, shape, mesh=None):
    """The placements (`Shard(d)` or `Replicate()`, one per mesh axis) of parameter `path`
    of `shape`; ValueError if it has no valid layout. Without `mesh`, `auto` takes its
    size from the job's process count."""
    entries, _, why = _resolve(RULES, DEFAULT, path, _shape_of(shape), _sizes(mesh))
    if why is not None:
        raise ValueError(why)
    return _placements(entries, MESH_AXES)


def distribute(module, mesh=None):
    """`module` (a torch.nn.Module) with every parameter a DTensor placed by the plan, in
    place; returns it. A parameter's path is its name in `named_parameters()`. Every
    parameter is resolved first: one ValueError lists those without a valid layout, and
    nothing moves. Without `mesh`, `mesh()` is made once they have resolved."""
    sizes = _sizes(mesh)
    placed, errors = {}, []
    for name, param in _parameters(module):
        entries, _, why = _resolve(RULES, DEFAULT, name, _shape_of(param.shape), sizes)
        if why is not None:
            errors.append(why)
        placed[name] = _placements(entries, MESH_AXES)
    if errors:
        raise ValueError(f"plan {PLAN_NAME!r}: {len(errors)} parameter(s) have no valid "
                         "layout:\n  " + "\n  ".join(errors))
    if mesh is None:
        mesh = _init_mesh(tuple(sizes[n] for n in MESH_AXES), MESH_AXES)
    return _distribute(module, mesh, placed)

"""Whether a plan's mesh can be built on a topology, found without compiling anything.

Three checks, each a located diagnostic at the `mesh` line (a secondary label at the
`slices` line where the plan has one), with the shapes near the one asked for that do
fit as help:

- **device count** (P201): the topology's devices, times the plan's slices, must fit the
  mesh, as `plan.with_devices(n)` binds it;
- **one device per chip** (P804): a mesh sized by TensorCores on a generation that runs
  one device per chip (TPU v4: 64 devices on `v4:4x4x4`, not 128);
- **assignment** (P803): JAX's own topology-aware assignment
  (`mesh_utils.create_device_mesh`, `create_hybrid_device_mesh` across slices, which
  `jax.make_mesh` and `topologies.make_mesh` use) must place the mesh: each axis a product
  of physical axes (`(128, 2)` fails on `v6e:16x16`, whose axes are 16 and 16).

`place` builds the `jax.sharding.Mesh` the step is compiled on: JAX's assignment in the
plan's axis order, sizes and axis types, as `plan.mesh()` builds it on that hardware.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planc.check.binding import bind
from planc.diagnostics import Diagnostic, Label, PlanError, error, note
from planc.ir import PlanIR
from planc.targets.aot.topology import Topology

__all__ = ["Placement", "place", "check", "lint_topology", "slice_count", "nearby_shapes"]

# Shapes tried for the help, nearest first, and how many to offer.
_TRIED = 64
_OFFERED = 3


@dataclass(slots=True, eq=False)
class Placement:
    """The plan bound to the topology's device count (`ir`) and its `mesh` there."""

    ir: PlanIR
    mesh: object
    topology: Topology
    diagnostics: tuple[Diagnostic, ...]


def slice_count(ir: PlanIR) -> int:
    """How many slices the plan's mesh spans (the product of its `slices`)."""
    return math.prod(ir.mesh.slice_shape)


def check(ir: PlanIR, topology: Topology) -> tuple[PlanIR | None, list[Diagnostic], object]:
    """(the plan bound to the topology, its problems, the device grid or None)."""
    binding = bind(ir, len(topology.devices))
    if binding.ir is None:
        return None, [_count_problem(ir, topology)], None
    bound = binding.ir
    found = list(binding.problems)
    if topology.platform == "cpu":
        from planc.targets.devices import _device_grid

        grid = _device_grid(bound.mesh.shape, bound.mesh.slice_shape, topology.devices)
        return bound, found, grid
    grid, why = assign(bound.mesh.shape, bound.mesh.slice_shape, topology)
    if grid is None:
        found.append(_assignment_problem(bound, topology, why))
    elif why is _SPLIT:
        found.append(_split_note(bound, topology, split_axes(grid, bound.mesh.names)))
    return bound, found, grid


def axis_points(grid, i: int):
    """The chip coordinates of the devices along mesh axis `i` of `grid` (the other axes
    at 0, in the first device's slice), an array of shape (devices, physical dims); None
    for devices without coordinates (CPU)."""
    import numpy as np

    grid = np.asarray(grid)
    index = [0] * grid.ndim
    index[i] = slice(None)
    first = getattr(grid.flat[0], "slice_index", 0)
    along = [d for d in grid[tuple(index)].flat if getattr(d, "slice_index", 0) == first]
    if any(getattr(d, "coords", None) is None for d in along):
        return None
    return np.array([tuple(d.coords) for d in along])


def varying_dims(points) -> tuple[int, ...]:
    """The physical dimensions along which `points` (from `axis_points`) differ."""
    return tuple(k for k in range(points.shape[1]) if len(set(points[:, k].tolist())) > 1)


def slice_extent(grid):
    """The chips along each physical dimension of one slice of `grid` (TPU devices)."""
    import numpy as np

    first = [d for d in np.asarray(grid).flat if getattr(d, "slice_index", 0) == 0]
    return np.max(np.array([tuple(d.coords) for d in first]), axis=0) + 1


def whole_dims(points, dims, extent) -> bool:
    """Whether the axis at `points` holds every chip of the physical dimensions `dims`:
    a whole sub-torus (a plane, a cube), not a part of one."""
    along = [len(set(points[:, k].tolist())) for k in dims]
    return (all(n == int(extent[k]) for n, k in zip(along, dims))
            and len(points) == math.prod(along))


def split_axes(grid, names) -> dict[str, tuple[int, ...]]:
    """{mesh axis: the physical dimensions it runs over} for each axis of `grid` (an array
    of TPU devices) that runs over part of more than one: a split physical axis. An axis
    that holds several dimensions whole (a plane of the torus) splits none."""
    out = {}
    extent = slice_extent(grid)
    for i, name in enumerate(names):
        points = axis_points(grid, i)
        dims = varying_dims(points) if points is not None else ()
        if len(dims) > 1 and not whole_dims(points, dims, extent):
            out[name] = dims
    return out


def _split_note(bound: PlanIR, topology: Topology, split: dict) -> Diagnostic:
    span, secondary = _spans(bound, topology)
    dims = "xyz"
    which = "; ".join(f"`{axis}` runs over physical axes "
                      + " and ".join(dims[d] if d < 3 else str(d) for d in physical)
                      for axis, physical in split.items())
    return note("P816", f"the mesh splits physical axes of {topology.name}: {which}", span,
                label="this mesh", secondary=secondary,
                help=("JAX places it (`allow_split_physical_axes`), as `plan.mesh()` does; a "
                      "collective over a split axis runs along a snake of the torus, one "
                      "link's worth of bandwidth where a whole physical axis has two "
                      "(`planc cost` prices it so)",) + _shapes_help(bound, topology, whole=True))


def place(ir: PlanIR, topology: Topology) -> Placement:
    """The plan's mesh on `topology`; `PlanError` with every problem when it has none."""
    import jax

    from planc.targets.jax.compat import axis_type

    bound, found, grid = check(ir, topology)
    if bound is None or grid is None or any(d.is_error for d in found):
        raise PlanError(tuple(found), ir.source_dict)
    types = tuple(axis_type(bound, t) for t in bound.mesh_axis_types)
    mesh = jax.sharding.Mesh(grid, bound.mesh.names, axis_types=types)
    return Placement(bound, mesh, topology, tuple(found))


def lint_topology(ir: PlanIR, name: str) -> tuple[int | None, list[Diagnostic]]:
    """`planc lint --topology NAME`: (the topology's device count, None when the mesh
    cannot take it; the mesh's problems there: P201, P803, P804, and the P816 note of a
    split physical axis). `TopologyError` when the
    name cannot be loaded."""
    from planc.targets.aot.topology import load_topology

    topology = load_topology(name, slice_count(ir))
    bound, found, _ = check(ir, topology)
    count = len(topology.devices) if bound is not None else None
    return count, [d for d in found if d.code in ("P201", "P803", "P804", "P816")]


# -- the checks ------------------------------------------------------------------------------

def assign(shape, slices, topology: Topology, split_ok: bool = True):
    """The devices of a mesh of `shape` (`slices` slices per axis) on `topology`, as
    `plan.mesh()` places them: (grid, None) when JAX's assignment places the mesh
    (splitting physical axes only when `split_ok`), else (None, its reason)."""
    from jax.experimental import mesh_utils

    devices = list(topology.devices)
    why = None
    for split in (False, True) if split_ok else (False,):  # as `plan.mesh()` places it
        try:
            if math.prod(slices) == 1:
                grid = mesh_utils.create_device_mesh(
                    tuple(shape), devices, allow_split_physical_axes=split)
            else:
                per_slice = tuple(g // s for g, s in zip(shape, slices))
                grid = mesh_utils.create_hybrid_device_mesh(
                    per_slice, tuple(slices), devices, allow_split_physical_axes=split)
            return grid, (_SPLIT if split else None)
        except (ValueError, NotImplementedError, AssertionError, KeyError, IndexError) as exc:
            why = why or _sentences(str(exc), 2)
    return None, why


# `_assign`'s second answer when the mesh was placed only by splitting a physical axis.
_SPLIT = "split"


def _sentences(text: str, n: int) -> str:
    parts = [p.strip() for p in text.replace("\n", " ").split(". ") if p.strip()]
    out = ". ".join(parts[:n])
    return (out if out.endswith(".") else out + ".") if out else "no reason given."


def _spans(ir: PlanIR, topology: Topology):
    span = ir.anchor
    secondary = ()
    if ir.mesh.slices_span is not None:
        secondary = (Label(ir.mesh.slices_span, f"{topology.slices} slices of "
                                                f"{topology.name}"),)
    return span, secondary


def _count_problem(ir: PlanIR, topology: Topology) -> Diagnostic:
    have = len(topology.devices)
    fixed = ir.mesh.device_count
    span, secondary = _spans(ir, topology)
    if (topology.one_per_chip and fixed is not None
            and fixed == have * topology.cores_per_chip):
        return error(
            "P804", f"the mesh needs {fixed} devices, the TensorCores of {topology.label}; "
            f"{topology.device_kind} runs one device per chip (megacore), so it has {have}",
            span, label=f"{fixed} devices", secondary=secondary, devices=have,
            help=_shapes_help(ir, topology, "size the mesh by chips"))
    if fixed is not None:
        need = f"the mesh needs {fixed} devices ({_sizes_text(ir)})"
    else:
        need = (f"the mesh's fixed axes ({_sizes_text(ir)}) do not divide them")
    return error("P201", f"the mesh does not fit {topology.label}, which has "
                 f"{topology.describe()}: {need}", span, label="this mesh",
                 secondary=secondary, devices=have, help=_shapes_help(ir, topology))


def _assignment_problem(bound: PlanIR, topology: Topology, why: str) -> Diagnostic:
    span, secondary = _spans(bound, topology)
    shape = ", ".join(str(a.size) for a in bound.mesh.axes)
    where = "each slice of " if topology.slices > 1 else ""
    return error("P803", f"JAX cannot place a mesh of ({shape}) on {where}{topology.name}: "
                 f"{why}", span, label="this mesh", secondary=secondary,
                 devices=len(topology.devices), help=_shapes_help(bound, topology))


def _sizes_text(ir: PlanIR) -> str:
    return ", ".join(f"{a.name}={'auto' if a.size is None else a.size}"
                     + (f"x{a.slices}" if a.slices > 1 else "") for a in ir.mesh.axes)


def _shapes_help(ir: PlanIR, topology: Topology, lead: str | None = None,
                 whole: bool = False) -> tuple[str, ...]:
    shapes = nearby_shapes(ir, topology, whole)
    names = [a.name for a in ir.mesh.axes]
    if not shapes:
        return (lead,) if lead else ()
    written = ", ".join("`mesh(" + ", ".join(f"{n} = {s}" for n, s in zip(names, shape)) + ")`"
                        for shape in shapes)
    per = "per slice " if topology.slices > 1 else ""
    text = (f"shapes {per}that fit {topology.label}"
            + (" with every axis whole" if whole else "") + f": {written}")
    return ((lead + "; " + text) if lead else text,)


# -- feasible shapes near the one asked for ------------------------------------------------------

def nearby_shapes(ir: PlanIR, topology: Topology, whole: bool = False) -> list[tuple[int, ...]]:
    """Up to `_OFFERED` per-slice axis sizes that fit the topology (count and JAX's
    assignment; with `whole`, without splitting a physical axis), nearest first to the
    sizes the plan asks for (an `auto` axis asks for none)."""
    axes = ir.mesh.axes
    slices = tuple(a.slices for a in axes)
    asked = [a.size for a in axes]
    per_slice = topology.per_slice
    candidates = sorted(_factorizations(per_slice, len(axes)),
                        key=lambda c: (_distance(c, asked), c))
    out = []
    for shape in candidates[:_TRIED]:
        if topology.platform == "cpu" or assign(
                tuple(s * k for s, k in zip(shape, slices)), slices, topology,
                split_ok=not whole)[0] is not None:
            out.append(shape)
            if len(out) == _OFFERED:
                break
    return out


def _distance(shape, asked) -> float:
    return sum(abs(math.log2(s) - math.log2(a)) for s, a in zip(shape, asked) if a)


def _factorizations(n: int, k: int, limit: int = 4096) -> list[tuple[int, ...]]:
    """Ordered k-tuples of positive integers whose product is n (at most `limit`)."""
    out: list[tuple[int, ...]] = []
    divisors = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0] if n >= 1 else []
    divisors = sorted(set(divisors + [n // d for d in divisors]))

    def walk(rest: int, prefix: tuple[int, ...]) -> None:
        if len(out) >= limit:
            return
        if len(prefix) == k - 1:
            out.append(prefix + (rest,))
            return
        for d in divisors:
            if d > rest:
                break
            if rest % d == 0:
                walk(rest // d, prefix + (d,))

    if k >= 1 and n >= 1:
        walk(n, ())
    return out

"""How each mesh axis lies on the chips' torus, and the links a collective over it can use.

A mesh axis is a set of devices; on a TPU slice they sit at chip coordinates. An axis
whose devices run along one physical dimension of the slice, all of it, on a slice large
enough to close that dimension into a ring (the chip table's `wraparound_from`), is a
**ring**: a bidirectional ring algorithm uses both directions of the links, two links'
worth. Along part of a dimension it is a **line**: one link's worth. An axis that holds
several physical dimensions whole, each closed into a ring (`fsdp = 256` on a 16x16
slice: the whole torus), is a **torus**: XLA:TPU's collectives over it run along every
one of those rings at once (the compiled program names its strategy: `StrategyND`, two
colours, over 16,16), two links' worth per dimension. Any other axis over several
dimensions is **split** and lies as a snake, one link's worth: part of several
dimensions (JAX's `allow_split_physical_axes`), or dimensions too short to close (all
of `v5e:2x4`). An axis that spans slices crosses the **DCN**. `cpu:N` has no
coordinates: every axis is priced as a line.

Where the compiled program records the algorithm XLA:TPU chose for a collective
(`planc.targets.cost.counting.Algorithm`), its links come from that record instead
(`recorded_links`): the ring directions it drives at once (its colours, each both ways
under a pincer, one way in a `UniDirection*` strategy), at most what the dimensions it
runs along carry: two links' worth along a dimension that closes into a ring, one along
one that does not (a ring laid on an open line comes back over the links it went out
on), two for a one-dimensional ring over several dimensions (a cycle through
neighbours), and never more than the chip's links. Which dimensions close still comes
from the chip table: a compile-only topology tells XLA of no wraparound at all (its
target's `wrap` is empty even for `v4:4x4x4`), so the record cannot say.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planc.targets.aot.feasibility import axis_points, slice_extent, varying_dims, whole_dims

__all__ = ["AxisPlacement", "axis_placements", "recorded_links"]


@dataclass(slots=True, eq=False)
class AxisPlacement:
    """`kind` ("ring", "line", "torus", "split", "dcn"), the physical dimensions the axis runs
    over (`dims`, e.g. (0,) for x), `links`, the link-equivalents a collective over it
    uses when nothing says more, and `closed`, those of `dims` the axis holds whole on a
    slice large enough to close them into rings."""

    axis: str
    kind: str
    dims: tuple[int, ...]
    links: int
    closed: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {"axis": self.axis, "kind": self.kind, "physical_dims": list(self.dims),
                "links": self.links}


def axis_placements(mesh, slice_axes=(), wraparound_from: int = 0) -> dict[str, AxisPlacement]:
    """{axis name: AxisPlacement} for a `jax.sharding.Mesh` whose devices may have
    `coords` (TPU); `slice_axes` span slices (DCN)."""
    devices = np.asarray(mesh.devices)
    names = tuple(mesh.axis_names)
    coords = [getattr(d, "coords", None) for d in devices.flat]
    out = {}
    if any(c is None for c in coords):
        for name in names:
            out[name] = AxisPlacement(name, "dcn" if name in slice_axes else "line", (), 1)
        return out
    extent = slice_extent(devices)

    def ring(k):  # dimension k whole, on a slice large enough to close it
        return bool(wraparound_from) and int(extent[k]) >= wraparound_from

    for i, name in enumerate(names):
        if name in slice_axes:
            out[name] = AxisPlacement(name, "dcn", (), 1)
            continue
        points = axis_points(devices, i)
        varying = varying_dims(points)
        # the dimensions the axis runs the whole length of, on a slice that closes them
        closed = tuple(k for k in varying
                       if ring(k) and len(set(points[:, k].tolist())) == int(extent[k]))
        if (len(varying) > 1 and whole_dims(points, varying, extent)
                and all(ring(k) for k in varying)):
            out[name] = AxisPlacement(name, "torus", varying, 2 * len(varying), closed)
        elif len(varying) > 1:
            out[name] = AxisPlacement(name, "split", varying, 1, closed)
        elif len(varying) == 1:
            k = varying[0]
            whole = whole_dims(points, varying, extent) and ring(k)
            out[name] = AxisPlacement(name, "ring" if whole else "line", varying,
                                      2 if whole else 1, closed if whole else ())
        else:  # size 1, or several cores of one chip
            out[name] = AxisPlacement(name, "line", (), 1)
    return out


def placements_on(topology, sizes: dict, wraparound_from: int = 0, dcn: str | None = None,
                  slices: int = 1) -> dict | None:
    """{axis: AxisPlacement} of a mesh of `sizes` ({name: global size}, in mesh order)
    placed on `topology` (a loaded `Topology`) as `plan.mesh()` places it, axis `dcn`
    spanning its `slices` slices; None when it cannot be placed."""
    import jax

    from planc.targets.aot.feasibility import assign

    shape = tuple(sizes.values())
    spans = tuple(slices if name == dcn else 1 for name in sizes)
    grid, _ = assign(shape, spans, topology)
    if grid is None:
        return None
    return axis_placements(jax.sharding.Mesh(grid, tuple(sizes)), (dcn,) if dcn else (),
                           wraparound_from)


def recorded_links(algorithm, where, ici_links: int) -> int | None:
    """The link-equivalents a collective whose recorded `algorithm` (a
    `counting.Algorithm`) runs over the axes lying as `where` (their `AxisPlacement`s) on
    a chip of `ici_links` links (see the module docstring); None where the record or the
    placement does not say (no colours recorded, the DCN, no physical dimension)."""
    asked = algorithm.directions if algorithm is not None else None
    if asked is None or not where or any(p.kind == "dcn" for p in where):
        return None
    dims = sorted({k for p in where for k in p.dims})
    closed = {k for p in where for k in p.closed}
    if not dims:
        return None
    if len(dims) > 1 and not algorithm.nd:
        carried = 2  # one ring through the neighbours of several dimensions
    else:
        carried = sum(2 if k in closed else 1 for k in dims)
    return max(1, min(asked, carried, ici_links))

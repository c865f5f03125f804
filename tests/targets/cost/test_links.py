"""How a mesh axis lies on the chips' torus, and the links `planc cost` prices a
collective over it with (compile-only TPU topologies: the `tpu` extra)."""

import jax
import pytest

pytest.importorskip("libtpu", reason="the tpu extra (libtpu) is not installed")

from planc.targets.aot.feasibility import assign, split_axes  # noqa: E402
from planc.targets.aot.topology import load_topology  # noqa: E402
from planc.targets.cost.chips import chip_named  # noqa: E402
from planc.targets.cost.links import axis_placements  # noqa: E402

WRAPAROUND = chip_named("v5e").wraparound_from  # 16: a v5e dimension of 16 closes a ring


def placed(topology, **sizes):
    grid, _ = assign(tuple(sizes.values()), (1,) * len(sizes), load_topology(topology))
    mesh = jax.sharding.Mesh(grid, tuple(sizes))
    found = axis_placements(mesh, (), WRAPAROUND)
    return {n: (p.kind, p.dims, p.links) for n, p in found.items()}, split_axes(grid, tuple(sizes))


def test_an_axis_holding_a_whole_plane_of_rings_uses_all_four_links():
    # fsdp = 256 on v5e:16x16 (MaxText's `ici_fsdp_parallelism: -1`): XLA:TPU runs its
    # collectives along both dimensions at once, each a ring both ways.
    kinds, split = placed("v5e:16x16", fsdp=256)
    assert kinds == {"fsdp": ("torus", (0, 1), 4)} and split == {}


def test_an_axis_holding_dimensions_too_short_to_close_is_a_snake_of_one_link():
    # by its placement alone (a collective whose algorithm XLA records is priced from
    # that: test_algorithms.py); the axis splits no physical axis, so lint says nothing
    # of it (no P816)
    kinds, split = placed("v5e:2x4", fsdp=8)
    assert kinds == {"fsdp": ("split", (0, 1), 1)} and split == {}


def test_an_axis_over_part_of_two_dimensions_is_a_snake_of_one_link():
    kinds, split = placed("v5e:4x4", fsdp=8, tp=2)
    assert kinds["fsdp"] == ("split", (0, 1), 1) and split == {"fsdp": (0, 1)}
    assert kinds["tp"][0] == "line"


def test_an_axis_along_a_whole_ring_uses_its_two_directions():
    kinds, _ = placed("v5e:16x16", data=16, model=16)
    assert {k[0] for k in kinds.values()} == {"ring"} and {k[2] for k in kinds.values()} == {2}

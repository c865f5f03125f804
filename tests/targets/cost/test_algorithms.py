"""The algorithm XLA:TPU records for each collective (`collective_algorithm_config` in its
`backend_config`), and the links `planc cost` prices it over from that record.

The HLO under `data/` is XLA:TPU's own text, compile-only, JAX 0.10.2 (libtpu 0.0.42.1),
trimmed: `collective_algorithms.txt` holds one recorded collective per line, metadata and
replica groups cut; `fsdp_step_v5e_2x4.hlo` the reduce-scatter fusion and all-gather of a
scanned FSDP step on `v5e:2x4`, as a module."""

from pathlib import Path

import pytest

from planc.targets.aot.collectives import collectives
from planc.targets.cost.calibration import UNCALIBRATED
from planc.targets.cost.chips import chip_named
from planc.targets.cost.counting import algorithm, count
from planc.targets.cost.links import AxisPlacement, recorded_links
from planc.targets.cost.model import terms

DATA = Path(__file__).parent / "data"
V5E, V5P = chip_named("v5e"), chip_named("v5p")


def recorded(topology_words: str):
    """The `Algorithm` of the line of `collective_algorithms.txt` under the comment that
    starts with `topology_words`."""
    lines = (DATA / "collective_algorithms.txt").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("# " + topology_words))
    return algorithm(lines[at + 1])


@pytest.mark.parametrize("where, strategy, colors, phases, directions", [
    ("v5e:16x16, fsdp = 256", "StrategyND", 2, 2, 4),
    ("v5e:16x16, data = 16", "StrategyRing", 1, 1, 2),
    ("v5e:2x4, fsdp = 8", "UniDirection1DRingStrategy", 2, 1, 2),
    ("v5e:4x4, fsdp = 16", "UniDirectionNDRingStrategy", 4, 2, 4),
    ("v5p:4x4x4, fsdp = 64", "UniDirectionNDRingStrategy", 6, 3, 6),
])
def test_the_strategy_and_its_colours_are_read_from_the_backend_config(
        where, strategy, colors, phases, directions):
    found = recorded(where)
    assert (found.strategy, found.colors, found.phases) == (strategy, colors, phases)
    assert found.directions == directions  # a pincer drives each colour both ways


def test_a_record_without_a_strategy_says_no_directions():
    found = recorded("v5e:16x16, model = 16, all-to-all")
    assert found.emitter == "NetRouterEmitter" and found.strategy is None
    assert found.directions is None


def test_an_instruction_without_a_record_has_no_algorithm():
    assert algorithm('backend_config={"flag_configs":[],"scoped_memory_configs":[]}') is None


def test_a_reduce_scatter_fusion_s_record_belongs_to_the_channel_of_its_all_reduce():
    # XLA:TPU writes the record on the fusion around the all-reduce, whose channel the
    # collectives report groups the reduce-scatter by
    hlo = (DATA / "fsdp_step_v5e_2x4.hlo").read_text()
    found = count(hlo).algorithms
    assert str(found[("reduce-scatter", "6")]) == "StrategyRing colors:1 phases:1"
    assert found[("all-gather", "7")].emitter == "1DAllGatherNonMajorDim"
    [scatter] = [c for c in collectives(hlo, (8,), ("fsdp",)) if c.kind == "reduce-scatter"]
    assert set(scatter.channels) == {"6"}


def test_the_collective_s_op_carries_its_algorithm():
    ops = {op.name: op for op in count((DATA / "fsdp_step_v5e_2x4.hlo").read_text()).ops}
    assert ops["fusion.25"].algorithm.strategy == "StrategyRing"
    assert ops["all-gather.24"].algorithm.directions is None


def placed(kind, dims, closed=()):
    return [AxisPlacement("a", kind, dims, 1, closed)]


def test_a_pincer_over_a_dimension_that_closes_uses_both_directions():
    ring = recorded("v5e:16x16, data = 16")
    assert recorded_links(ring, placed("ring", (0,), (0,)), V5E.ici_links) == 2


def test_a_ring_laid_on_an_open_line_gets_one_link_however_many_colours():
    # the way back runs over the links the ring went out on
    two_ways = recorded("v5e:2x4, fsdp = 8")
    assert recorded_links(two_ways, placed("line", (0,)), V5E.ici_links) == 1


def test_a_one_dimensional_ring_through_several_dimensions_closes_through_neighbours():
    # v5e:2x4, fsdp = 8: two one-way colours around a cycle of the 2x4 grid; by the
    # placement alone a snake of one link
    two_ways = recorded("v5e:2x4, fsdp = 8")
    assert recorded_links(two_ways, placed("split", (0, 1)), V5E.ici_links) == 2


def test_rings_along_each_open_dimension_get_one_link_each():
    four = recorded("v5e:4x4, fsdp = 16")
    assert recorded_links(four, placed("split", (0, 1)), V5E.ici_links) == 2


def test_rings_along_every_closed_dimension_use_every_link_of_the_chip():
    assert recorded_links(recorded("v5e:16x16, fsdp = 256"),
                          placed("torus", (0, 1), (0, 1)), V5E.ici_links) == 4
    assert recorded_links(recorded("v5p:4x4x4"), placed("torus", (0, 1, 2), (0, 1, 2)),
                          V5P.ici_links) == 6


def test_no_more_links_than_the_chip_has():
    six = recorded("v5p:4x4x4")
    assert recorded_links(six, placed("torus", (0, 1, 2), (0, 1, 2)), 4) == 4


def test_without_colours_or_over_the_dcn_the_record_gives_no_links():
    assert recorded_links(recorded("v5e:16x16, model = 16, all-to-all"),
                          placed("ring", (0,), (0,)), V5E.ici_links) is None
    assert recorded_links(recorded("v5e:16x16, data = 16"), placed("dcn", ()),
                          V5E.ici_links) is None


def test_a_collective_is_priced_over_its_recorded_links_and_one_without_by_its_placement():
    hlo = (DATA / "fsdp_step_v5e_2x4.hlo").read_text()
    placements = {"fsdp": AxisPlacement("fsdp", "split", (0, 1), 1)}
    found = {t.collective.kind: t for t in
             terms(count(hlo), collectives(hlo, (8,), ("fsdp",)), V5E, UNCALIBRATED,
                   placements) if t.collective is not None}
    scatter, gather = found["reduce-scatter"], found["all-gather"]
    assert (scatter.links, scatter.algorithm) == (2, "StrategyRing colors:1 phases:1")
    assert (gather.links, gather.algorithm) == (1, None)
    assert scatter.seconds == pytest.approx(scatter.sent / (2 * V5E.ici_link_bytes_per_s))

"""`suggest --search --step` on a compile-only TPU topology (`v5e:2x4`, through libtpu):
the candidates compiled for the chip they would run on, priced with its table."""

import pytest

from planc.cli.common import prepare_jax
from planc.suggest.search import search

from .test_search_host import mlp_builder


@pytest.fixture(scope="module")
def found():
    prepare_jax("v5e:2x4")
    return search(step="examples.search_step:build", topology="v5e:2x4", compiles=2)


def test_the_winner_is_compiled_for_the_tpu_and_within_the_limit(found):
    w = found.searched.winner
    assert w.compiled and w.compiled_peak <= found.searched.limit
    assert w.cost.chip == "v5e" and not w.cost.estimate  # a TPU compile, not cpu:N


def test_the_limit_is_the_v5e_usable_memory_less_two_percent(found):
    assert found.searched.limit == int(16_909_336_064 * 0.98) >> 20 << 20


def test_the_analytic_estimate_is_within_a_factor_of_two_of_the_compiled_one(found):
    # the model ranks; on TPU its dense data- and tensor-parallel steps come close
    for o in found.searched.outcomes:
        if o.compiled:
            assert 0.5 < o.score.estimate_s / o.compiled_s < 2


def test_on_two_slices_the_search_chooses_the_axis_over_the_dcn():
    from suggest.search.test_search_analytic import decoder

    from planc.check.checker import check
    from planc.resolve import validate
    from planc.targets.cost.chips import chip_named

    prepare_jax("v5e:2x4")
    vs = decoder()
    found = search(vs, topology="v5e:2x4", slices=2, tokens=16 * 2048)
    spans = {o.candidate.dcn for o in found.searched.outcomes}
    assert spans == {"data", "fsdp"}  # `model` never crosses the DCN
    dp = next(o for o in found.searched.outcomes if o.candidate.family == "dp")
    (over_dcn,) = [t for t in dp.score.terms if t.name == "all-reduce over data"]
    assert over_dcn.seconds == pytest.approx(over_dcn.sent / chip_named("v5e").dcn_bytes_per_s)
    w = found.searched.winner
    assert f"slices({w.candidate.dcn} = 2)" in found.text
    report = validate(check(found.text, "searched.kd"), vs, 16)
    assert not [d for d in report.diagnostics if d.severity.value in ("error", "warning")]


def test_a_two_slice_winner_compiles_on_the_two_slices():
    prepare_jax("v5e:2x4")
    found = search(step="examples.search_step:build", topology="v5e:2x4", slices=2,
                   compiles=1)
    w = found.searched.winner
    assert w.compiled and w.cost.devices == 16
    assert any(p.kind == "dcn" for p in w.cost.placements.values())


# Plain MLP layers, 16,384 tokens: their analytic peaks are 1.2-1.5x over what XLA:TPU
# keeps (the update's new slots, and the activations, counted where XLA keeps fewer).
MLP = mlp_builder(1024, 4, 16, 1024)


def test_a_search_compiles_before_saying_nothing_fits_however_far_over_the_analytic_peaks(
        search_step, monkeypatch):
    from planc.suggest.search import searcher

    # a slack under those ratios puts every candidate "far" over the limit
    monkeypatch.setattr(searcher, "ANALYTIC_SLACK", 1.2)
    prepare_jax("v5e:2x4")
    found = search_step("mlp_step", MLP, topology="v5e:2x4", budget=300 << 20, compiles=1,
                        file="mlp.kd")
    s = found.searched
    # Every candidate's analytic peak is over the slack: none is "near" the limit.
    assert all(o.score.peak > 1.2 * s.limit for o in s.outcomes)
    assert s.winner.compiled and s.winner.compiled_peak <= s.limit

"""`suggest --search --step` on a compile-only TPU topology (`v5e:2x4`, through libtpu):
the candidates compiled for the chip they would run on, priced with its table."""

import pytest

from planc.cli.common import prepare_jax
from planc.suggest.search import search


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

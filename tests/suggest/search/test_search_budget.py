"""The limit a search holds its candidates to: `--budget` where given, but never past what
the chip holds when the devices are a chip's (a TPU topology, or `--chip`); and when
nothing fits, help that names only what would."""

import pytest

from planc.cli.common import prepare_jax
from planc.cli.dispatch import main
from planc.diagnostics import PlanError
from planc.sources import write_manifest
from planc.suggest.search import search
from planc.suggest.search.searcher import margin_limit
from planc.targets.cost.chips import chip_named

from .test_search_analytic import decoder

GiB = 2**30
TOKENS = 16 * 4096
V5E_HOLDS = chip_named("v5e").hbm_usable


def too_large():
    """6.4B parameters in bf16: on one v5e not even the parameters and their gradients
    fit, with every option the search has."""
    return decoder(width=4096, layers=32)


def refused(**kwargs):
    """Every diagnostic of a search that finds no plan: the error first, then its notes."""
    with pytest.raises(PlanError) as exc:
        search(**kwargs)
    return exc.value.diagnostics


def refusal(**kwargs):
    return refused(**kwargs)[0]


def test_a_budget_past_what_the_named_chip_holds_is_p514():
    d = refusal(model=decoder(), devices=16, tokens=TOKENS, chip="v5e", budget=40 * GiB)
    assert d.code == "P514"
    assert "40.0 GiB per device" in d.message and "15.7 GiB" in d.message


def test_a_budget_past_a_tpu_topologys_chip_is_p514_and_writes_nothing(capsys, tmp_path):
    model, plan = tmp_path / "decoder.json", tmp_path / "out.kd"
    write_manifest(decoder(), str(model))
    code = main(["suggest", "--search", "--model", str(model), "--topology", "v5e:1x1",
                 "--tokens", str(TOKENS), "--budget", "40GiB", "-o", str(plan)])
    assert code == 1 and "P514" in capsys.readouterr().err and not plan.exists()


def test_on_a_tpu_topology_the_memory_is_its_own_chips_whatever_chip_prices_it():
    prepare_jax("v5e:2x4")
    found = search(decoder(), topology="v5e:2x4", chip="v6e", tokens=TOKENS)
    assert found.searched.chip.name == "v6e"  # priced as the chip named
    assert found.searched.limit == margin_limit(V5E_HOLDS)  # held to the v5e's memory
    d = refusal(model=decoder(), topology="v5e:2x4", chip="v6e", tokens=TOKENS,
                budget=20 * GiB)
    assert d.code == "P514" and "a v5e chip holds" in d.message


def test_a_budget_of_all_the_chip_holds_is_the_limit():
    found = search(decoder(), 16, tokens=TOKENS, chip="v5e", budget=V5E_HOLDS)
    assert found.searched.limit == V5E_HOLDS


def test_without_a_chip_the_budget_is_the_users_to_set():
    # `--devices N` alone prices on a v5e but does not say the devices are v5e chips
    found = search(decoder(), 16, tokens=TOKENS, budget=40 * GiB)
    assert found.searched.limit == 40 * GiB


def test_nothing_fits_without_a_step_does_not_offer_remat_it_already_weighed():
    d = refusal(model=too_large(), devices=1, tokens=TOKENS, chip="v5e")
    assert d.code == "P510" and "remat" in d.message  # the closest is a remat candidate
    assert "remat" not in d.help[0]


def test_nothing_fits_names_what_holds_the_most_of_the_closest_candidates_peak():
    d = refusal(model=too_large(), devices=1, tokens=2048, chip="v5e")
    # its slots on the host, the update sets its peak: Adam's two slots brought back
    assert "slots on host" in d.message
    assert d.message.endswith("; the most is optimizer (24.5 GiB)")


def test_nothing_fits_under_the_chips_own_limit_offers_no_larger_budget():
    d = refusal(model=too_large(), devices=1, tokens=TOKENS, chip="v5e")
    assert d.code == "P510" and "--budget" not in d.help[0]
    assert d.help[0].startswith("more devices")


def test_nothing_fits_under_a_smaller_budget_offers_one_up_to_what_the_chip_holds():
    d = refusal(model=decoder(), devices=16, tokens=TOKENS, chip="v5e", budget=64 << 20)
    assert d.code == "P510"
    assert "a larger --budget (the chip holds 15.7 GiB)" in d.help[0]


def test_nothing_fits_without_a_chip_offers_a_larger_budget():
    d = refusal(model=decoder(), devices=16, tokens=TOKENS, budget=64 << 20)
    assert d.code == "P510" and "a larger --budget," in d.help[0]


def test_the_host_slots_note_offers_a_larger_budget_only_where_the_chip_has_room():
    def p513(**kwargs):
        found = refused(model=too_large(), devices=1, tokens=2048, **kwargs)
        (note,) = [d for d in found if d.code == "P513"]
        return note.help[0]

    assert "--budget" not in p513(chip="v5e")
    assert "more devices or a larger --budget keep" in p513(budget=8 * GiB)

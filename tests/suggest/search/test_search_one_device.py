"""`suggest --search` on one device: nothing to split, so the choices are the step's own,
remat and the optimizer slots on the host, each weighed as on many devices."""

import pytest

from planc.cli.dispatch import main
from planc.diagnostics import PlanError
from planc.sources import write_manifest
from planc.suggest.search import search

from .test_search_analytic import decoder

TOKENS = 8 * 2048


@pytest.fixture(scope="module")
def unbounded():
    return search(decoder(), 1, tokens=TOKENS)


def test_one_device_weighs_the_plain_step_and_its_remat_twin(unbounded):
    outcomes = unbounded.searched.outcomes
    assert sorted(o.candidate.family for o in outcomes) == ["dp", "dp + remat"]
    assert {o.candidate.mesh_text for o in outcomes} == {"data=1"}


def test_one_device_takes_remat_when_only_remat_fits(unbounded):
    unbounded = {o.candidate.remat: o.score.peak for o in unbounded.searched.outcomes}
    assert unbounded[True] < unbounded[False]
    between = (unbounded[True] + unbounded[False]) // 2
    found = search(decoder(), 1, tokens=TOKENS, budget=between)
    assert found.searched.winner.candidate.remat
    (plain,) = [r for r in found.rows if r.kind == "why_not"]
    assert not plain.outcome.candidate.remat and "over" in plain.why


def test_a_remat_winner_says_its_plain_twin_does_not_fit_and_by_how_much(unbounded):
    peaks = {o.candidate.remat: o.score.peak for o in unbounded.searched.outcomes}
    found = search(decoder(), 1, tokens=TOKENS, budget=(peaks[True] + peaks[False]) // 2)
    (line,) = [x for x in found.text.splitlines() if x.startswith("# With remat")]
    assert "; without it: does not fit: " in line and " over; the most is " in line


def test_a_remat_winner_whose_plain_twin_fits_says_how_much_slower_the_twin_is():
    # narrow layers over many tokens (and a small vocabulary, whose logits would not fit):
    # the stored activations' HBM traffic outweighs remat's second forward
    found = search(decoder(width=128, vocab=256), 1, tokens=8 * TOKENS)
    assert found.searched.winner.candidate.remat
    (line,) = [x for x in found.text.splitlines() if x.startswith("# With remat")]
    assert "; without it: +" in line and "step time" in line and "does not fit" not in line


def test_the_one_device_plan_says_so_and_lints_clean(capsys, tmp_path):
    model, plan = tmp_path / "decoder.json", tmp_path / "one.kd"
    write_manifest(decoder(), str(model))
    code = main(["suggest", "--search", "--model", str(model), "--devices", "1",
                 "--tokens", str(TOKENS), "-o", str(plan)])
    assert code == 0
    text = plan.read_text()
    assert "on 1 device: " in text and "one device, every variable whole on it" in text
    assert main(["lint", str(plan), "--model", str(model), "--devices", "1", "--strict"]) == 0


def test_zero_devices_is_a_usage_error(capsys, tmp_path):
    model = tmp_path / "decoder.json"
    write_manifest(decoder(), str(model))
    code = main(["suggest", "--search", "--model", str(model), "--devices", "0",
                 "--tokens", str(TOKENS)])
    assert code == 2 and "--devices expects an integer >= 1" in capsys.readouterr().err


def test_a_device_count_below_one_is_p509_in_python():
    with pytest.raises(PlanError) as exc:
        search(decoder(), 0, tokens=TOKENS)
    d = exc.value.diagnostics[0]
    assert d.code == "P509" and "at least 1 device, got 0" in d.message


def test_a_step_on_one_device_compiles_both_candidates_and_the_winner_fits():
    found = search(step="examples.search_step:build", topology="cpu:1")
    s = found.searched
    assert [o.compiled for o in s.outcomes] == [True, True]
    assert s.winner.compiled_peak <= s.limit
    assert "on 1 device: " in found.text

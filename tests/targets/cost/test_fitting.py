"""Fitting a calibration (`planc.targets.cost.fitting`): the efficiencies and overlap that
bring the cost model's estimates closest to measured step times, found for steps whose
times the model can explain exactly, and only for the figures some step decides."""

import math
import random

import pytest

from planc.targets.cost.fitting import Sample, estimate, fit
from planc.targets.cost.model import Term

TRUTH = {"matmul": 0.55, "hbm": 0.8, "ici": 0.6, "dcn": 1.0}


def step(name, compute=0.0, memory=0.0, talk=0.0, efficiency=TRUTH, overlap=0.0):
    """A step with these peak-rate terms, 'measured' at the time the model gives under
    `efficiency` and `overlap`."""
    terms = [Term("matmul compute", "compute", 0, compute),
             Term("HBM traffic", "memory", 0, memory)]
    if talk:
        terms.append(Term("all-reduce over data", "collective", 0, talk, links=1))
    probe = Sample(name, terms, 1.0)
    return Sample(name, terms, estimate(probe, efficiency, overlap))


def test_a_compute_bound_and_a_memory_bound_step_give_both_efficiencies():
    result = fit([step("mlp", compute=1.0, memory=0.1), step("norms", compute=0.1, memory=1.0)])
    assert result.efficiency["matmul"] == pytest.approx(0.55, rel=1e-4)
    assert result.efficiency["hbm"] == pytest.approx(0.8, rel=1e-4)
    assert set(result.fitted) == {"matmul", "hbm"}


def test_an_efficiency_no_step_decides_keeps_the_peak_and_is_listed_unfitted():
    result = fit([step("a", compute=1.0, memory=0.1), step("b", compute=2.0, memory=0.1)])
    assert result.efficiency["hbm"] == 1.0 and "hbm" in result.unfitted
    assert result.efficiency["matmul"] == pytest.approx(0.55, rel=1e-4)


def test_without_collectives_the_overlap_and_links_are_not_fitted():
    result = fit([step("a", compute=1.0, memory=0.5)])
    assert {"ici", "dcn", "overlap"} <= set(result.unfitted)
    assert result.overlap == 0.0 and result.efficiency["ici"] == 1.0


def test_steps_with_collectives_are_explained_exactly():
    steps = [step(f"s{i}", compute=c, memory=m, talk=k, overlap=0.4)
             for i, (c, m, k) in enumerate([(1.0, 0.2, 0.1), (0.5, 0.2, 1.0),
                                            (0.1, 1.0, 0.3), (1.0, 0.1, 2.0)])]
    result = fit(steps)
    for s, e in zip(steps, result.estimates):
        assert e == pytest.approx(s.measured_s, rel=1e-3)
    assert "ici" in result.fitted and "overlap" in result.fitted


def test_two_terms_tied_at_the_start_are_still_fitted():
    # Both terms equal at the search's first point (efficiency 0.5 each): only moving
    # both efficiencies together lowers the estimate.
    truth = {"matmul": 0.9, "hbm": 0.9, "ici": 1.0, "dcn": 1.0}
    steps = [step("tied", compute=1.0, memory=1.0, efficiency=truth)]
    [e] = fit(steps).estimates
    assert e == pytest.approx(steps[0].measured_s, rel=1e-4)


@pytest.mark.parametrize("seed", range(5))
def test_random_steps_generated_by_the_model_are_fitted_to_their_times(seed):
    rng = random.Random(seed)
    truth = {"matmul": rng.uniform(0.2, 1), "hbm": rng.uniform(0.2, 1),
             "ici": rng.uniform(0.2, 1), "dcn": 1.0}
    overlap = rng.uniform(0, 0.9)
    steps = [step(str(i), compute=rng.uniform(0.01, 1), memory=rng.uniform(0.01, 1),
                  talk=rng.uniform(0.01, 1), efficiency=truth, overlap=overlap)
             for i in range(6)]
    result = fit(steps)
    worst = max(abs(math.log(e / s.measured_s)) for s, e in zip(steps, result.estimates))
    assert worst < 1e-3


def test_a_fit_is_the_same_every_time():
    steps = [step("a", compute=1.0, memory=0.3, talk=0.2), step("b", compute=0.2, memory=1.0)]
    first, second = fit(steps), fit(steps)
    assert (first.efficiency, first.overlap) == (second.efficiency, second.overlap)


def test_no_steps_is_refused():
    with pytest.raises(ValueError, match="at least one measured step"):
        fit([])

"""Fitting a calibration (`planc.targets.cost.fitting`): the efficiencies, the cost of
starting an op and the overlap that bring the per-op model's estimates closest to
measured step times, found for steps whose times the model can explain exactly, and only
for the figures some step decides."""

import math
import random

import numpy as np
import pytest

from planc.targets.cost.calibration import Calibration
from planc.targets.cost.fitting import Sample, estimate, fit
from planc.targets.cost.model import Profile, Term

TRUTH = {"matmul": 0.55, "hbm": 0.8, "ici": 0.6, "dcn": 1.0}


def step(name, compute=0.0, memory=0.0, talk=0.0, ops=0, efficiency=TRUTH, overlap=0.0,
         op_s=0.0):
    """A step of one matmul op (`compute` seconds of FLOPs at the peak, a tenth of that
    in bytes), one memory-bound op (`memory` seconds of bytes) and `ops` empty ops, with
    `talk` seconds of all-reduce at the peak; 'measured' at the time the model gives
    under `efficiency`, `overlap` and `op_s`."""
    profile = Profile(np.array([compute, 0.0, 0.0]), np.array([compute / 10, memory, 0.0]),
                      np.array([1.0, 1.0, float(ops)]), 0.0, 0)
    talks = [Term("all-reduce over data", "collective", 0, talk, links=1)] if talk else []
    probe = Sample(name, profile, talks, 1.0)
    truth = Calibration(None, dict(efficiency), overlap, op_s=op_s)
    return Sample(name, profile, talks, estimate(probe, truth))


def test_a_compute_bound_and_a_memory_bound_step_give_both_efficiencies():
    result = fit([step("mlp", compute=1.0, memory=0.1), step("norms", compute=0.1, memory=1.0),
                  step("both", compute=0.5, memory=0.5)])
    assert result.efficiency["matmul"] == pytest.approx(0.55, rel=1e-3)
    assert result.efficiency["hbm"] == pytest.approx(0.8, rel=1e-3)
    assert {"matmul", "hbm"} <= set(result.fitted)


def test_the_ops_add_up_rather_than_the_larger_one_counting():
    [s] = [step("both", compute=1.0, memory=1.0, efficiency={k: 1.0 for k in TRUTH})]
    assert s.measured_s == pytest.approx(2.0)


def test_the_cost_of_starting_an_op_is_fitted_from_steps_of_many_small_ops():
    steps = [step("few", compute=1e-3, memory=1e-3, ops=10, op_s=5e-6),
             step("many", compute=1e-3, memory=1e-3, ops=2000, op_s=5e-6),
             step("big", compute=1e-2, memory=2e-3, ops=100, op_s=5e-6)]
    result = fit(steps)
    assert result.op_s == pytest.approx(5e-6, rel=1e-2)
    assert "op_s" in result.fitted


def test_without_collectives_the_overlap_and_links_are_not_fitted():
    result = fit([step("a", compute=1.0, memory=0.5)])
    assert {"ici", "dcn", "overlap"} <= set(result.unfitted)
    assert result.overlap == 0.0 and result.efficiency["ici"] == 1.0


def test_steps_with_collectives_are_explained_exactly():
    # more steps than figures to fit (matmul, hbm, ici, op_s, overlap)
    steps = [step(f"s{i}", compute=c, memory=m, talk=k, ops=n, overlap=0.4, op_s=1e-4)
             for i, (c, m, k, n) in enumerate([(1.0, 0.2, 0.1, 100), (0.5, 0.2, 1.0, 3000),
                                               (0.1, 1.0, 0.3, 10), (1.0, 0.1, 2.0, 1000),
                                               (0.3, 0.3, 0.3, 5000), (2.0, 0.5, 0.2, 50)])]
    result = fit(steps)
    for s, e in zip(steps, result.estimates):
        assert e == pytest.approx(s.measured_s, rel=1e-3)
    assert "ici" in result.fitted


@pytest.mark.parametrize("seed", range(3))
def test_random_steps_generated_by_the_model_are_fitted_to_their_times(seed):
    rng = random.Random(seed)
    truth = {"matmul": rng.uniform(0.2, 1), "hbm": rng.uniform(0.2, 1), "ici": 1.0, "dcn": 1.0}
    steps = [step(str(i), compute=rng.uniform(0.01, 1), memory=rng.uniform(0.01, 1),
                  efficiency=truth) for i in range(6)]
    result = fit(steps)
    worst = max(abs(math.log(e / s.measured_s)) for s, e in zip(steps, result.estimates))
    assert worst < 1e-3


def test_a_fit_is_the_same_every_time():
    steps = [step("a", compute=1.0, memory=0.3, talk=0.2), step("b", compute=0.2, memory=1.0)]
    first, second = fit(steps), fit(steps)
    assert (first.efficiency, first.overlap, first.op_s) == (second.efficiency,
                                                              second.overlap, second.op_s)


def test_no_steps_is_refused():
    with pytest.raises(ValueError, match="at least one measured step"):
        fit([])

"""The calibration planc ships for the v5e (`calibrations/v5e.json`) is what the step
times measured on a real chip fit, and it predicts the steps it was not fitted on: the
measurements and each step's compiled program are kept in `bench/chip_data/2026-12-07/`
(the booking it was fitted on) and `2026-12-07b/` (a second booking's 18 steps, keras-hub
model and searched plan, with the programs the chip compiled), so a change to the counts
or the model that would move the shipped figures, or miss a measured step, fails here,
with no chip."""

import gzip
import json
import sys
from pathlib import Path

import pytest

from planc.targets.cost.calibration import SHIPPED, read_calibration
from planc.targets.cost.chips import chip_named
from planc.targets.cost.counting import count
from planc.targets.cost.fitting import Sample, estimate, fit
from planc.targets.cost.model import bounds, op_terms, profile

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "bench" / "chip_data" / "2026-12-07"
SECOND = ROOT / "bench" / "chip_data" / "2026-12-07b"
sys.path.insert(0, str(ROOT / "bench"))

import chip_fit  # noqa: E402
import chip_steps  # noqa: E402


def measured(data):
    """`{name: (Sample, Counts)}` of every step the chip measured in `data`."""
    v5e = chip_named("v5e")
    out = {}
    for name, seconds in chip_fit.measured_times(data).items():
        counts = count(gzip.decompress((data / "hlo" / f"{name}.hlo.gz").read_bytes()).decode())
        out[name] = (Sample(name, profile(counts.ops, v5e), (), seconds), counts)
    return out


@pytest.fixture(scope="module")
def samples():
    return {name: sample for name, (sample, _) in measured(DATA).items()}


@pytest.fixture(scope="module")
def second():
    return measured(SECOND)


@pytest.fixture(scope="module")
def shipped():
    return read_calibration(str(Path(SHIPPED) / "v5e.json"), "v5e")


def test_the_shipped_file_is_the_fit_of_the_steps_named_before_it(samples, shipped):
    fitted = fit([samples[n] for n in chip_steps.FIT])
    for key in ("matmul", "hbm"):
        assert fitted.efficiency[key] == pytest.approx(shipped.efficiency[key], rel=1e-3)
    assert fitted.op_s == pytest.approx(shipped.op_s, rel=1e-3)


def test_every_step_it_was_not_fitted_on_is_predicted_within_15_percent(samples, shipped):
    checked = [n for n in samples if n not in chip_steps.FIT]
    assert len(checked) >= 5
    for name in checked:
        s = samples[name]
        assert estimate(s, shipped) == pytest.approx(s.measured_s, rel=0.15), name


def test_every_measured_time_lies_between_its_bounds(samples, shipped):
    for name, s in samples.items():
        lower, upper, _ = bounds(op_terms(s.profile, shipped), shipped)
        assert lower <= s.measured_s <= upper, name


def test_the_shipped_file_says_where_it_was_measured(shipped):
    doc = json.loads((Path(SHIPPED) / "v5e.json").read_text())
    assert doc["measured"]["device_kind"] == "TPU v5 lite"
    assert set(doc["measured"]["unfitted"]) == {"ici", "dcn", "overlap"}


def test_the_second_bookings_steps_are_predicted_within_15_percent_where_xla_estimates_every_op(
        second, shipped):
    checked = {n: v for n, v in second.items() if n not in chip_steps.FIT}
    assert len(checked) >= 16
    for name, (s, counts) in checked.items():
        if counts.unestimated:
            continue  # said by P824, the one step outside: tested as such below
        assert estimate(s, shipped) == pytest.approx(s.measured_s, rel=0.15), name


def test_the_one_step_the_model_misses_has_ops_xla_could_not_estimate(second, shipped):
    missed = [n for n, (s, _) in second.items()
              if estimate(s, shipped) != pytest.approx(s.measured_s, rel=0.15)]
    assert missed == ["decoder_long_remat"]
    assert second["decoder_long_remat"][1].unestimated

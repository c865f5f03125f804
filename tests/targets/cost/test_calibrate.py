"""`planc cost --calibrate`: steps run on the attached devices, the cost model fitted to
their times, the `planc.calibration/1` file it writes. No chip is attached here, so the
machinery runs on the 8 CPU devices priced as a v5e; the command itself refuses them."""

import json
import math

import pytest

import planc
from planc.cli import main
from planc.targets.aot.topology import attached_topology
from planc.targets.cost.calibrate import CalibrationRun, measure_steps
from planc.targets.cost.calibration import read_calibration
from planc.targets.cost.chips import chip_named
from planc.targets.cost.estimate import cost_of
from planc.targets.cost.fitting import fit
from planc.targets.cost.measure import time_step

PLAN = "plan copies\nmesh(data = auto)\ndata_parallel\n"

STEPS = """
import jax, jax.numpy as jnp, optax

optimizer = optax.adam(1e-3)


def scanned_mlp(width, layers, batch):
    def loss(p, x):
        def body(h, w):
            return jnp.tanh(h @ w), None
        return jnp.mean(jax.lax.scan(body, x, p["w"])[0] ** 2)

    def step(p, s, x):
        value, g = jax.value_and_grad(loss)(p, x)
        updates, s = optimizer.update(g, s, p)
        return optax.apply_updates(p, updates), s, value

    def build():
        p = {"w": jax.ShapeDtypeStruct((layers, width, width), jnp.float32)}
        x = jax.ShapeDtypeStruct((batch, width), jnp.float32)
        return step, p, jax.eval_shape(optimizer.init, p), x
    return build


small = scanned_mlp(128, 2, 32)
large = scanned_mlp(256, 4, 128)

"""


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "plan.kd").write_text(PLAN)
    (tmp_path / "cal_steps.py").write_text(STEPS)
    return tmp_path


@pytest.fixture
def plan():
    return planc.loads(PLAN, file="plan.kd")


def measured(plan, specs, repeats=3):
    return measure_steps(plan.ir, specs, attached_topology(), "v5e", repeats=repeats,
                         plan_of=lambda ir: plan)


def test_each_step_is_timed_repeats_times_after_its_warmup(workdir, plan):
    [step] = measured(plan, ["cal_steps:small"], repeats=4)
    assert len(step.timing.samples) == 4
    assert min(step.timing.samples) <= step.timing.seconds <= max(step.timing.samples)
    assert all(s > 0 for s in step.timing.samples)


def test_a_step_is_never_measured_faster_than_its_lower_bound(workdir, plan):
    for step in measured(plan, ["cal_steps:small", "cal_steps:large"]):
        assert step.timing.seconds >= step.cost.lower_s


def test_the_written_file_reproduces_the_fitted_estimates_through_planc_cost(workdir, plan,
                                                                           monkeypatch):
    from planc.targets.cost import calibration as calibration_file

    # XLA:CPU runs hundreds of times below a v5e's peaks: its fitted efficiencies are
    # under the floor a chip's file is held to, which is lowered for this round trip.
    monkeypatch.setattr(calibration_file, "FLOOR", 1e-6)
    steps = measured(plan, ["cal_steps:small", "cal_steps:large"])
    result = fit([s.sample for s in steps])
    run = CalibrationRun(steps, result, chip_named("v5e"), "cpu", 8, "jax", "2026-12-06",
                         "plan.kd", 3)
    path = workdir / "v5e.json"
    path.write_text(json.dumps(run.document()))
    calibration = read_calibration(str(path), "v5e")
    for step, estimate in zip(steps, result.estimates):
        again = cost_of(plan.ir, step.cost.aot, calibration=str(path))
        assert again.estimate_s == pytest.approx(estimate, rel=1e-4)
        # Fitted, each estimate is far nearer its measurement than the peak rates' (XLA:CPU
        # runs hundreds of times below a v5e's peaks).
        error = abs(math.log(again.estimate_s / step.timing.seconds))
        assert error < 0.5 * abs(math.log(step.cost.estimate_s / step.timing.seconds))
    assert calibration.efficiency == pytest.approx(
        {k: float(f"{v:.6g}") for k, v in result.efficiency.items()})


def test_the_document_names_where_it_was_measured_and_what_it_fitted(workdir, plan):
    steps = measured(plan, ["cal_steps:small"])
    doc = CalibrationRun(steps, fit([s.sample for s in steps]), chip_named("v5e"), "cpu", 8,
                         "0.10.2", "2026-12-06", "plan.kd", 3).document()
    assert doc["schema"] == "planc.calibration/1" and doc["chip"] == "v5e"
    m = doc["measured"]
    assert (m["device_kind"], m["jax"], m["date"], m["repeats"]) == ("cpu", "0.10.2",
                                                                     "2026-12-06", 3)
    assert set(m["fitted"]) | set(m["unfitted"]) == {"matmul", "hbm", "ici", "dcn", "op_s",
                                                      "overlap"}
    [row] = m["steps"]
    assert row["step"] == "cal_steps:small" and row["measured_s"] >= row["lower_s"]
    # No step here crosses slices: DCN is not measured, and keeps the chip's peak.
    assert "dcn" in m["unfitted"] and doc["efficiency"]["dcn"] == 1.0


def test_a_step_runs_with_zeros_where_its_builder_gave_only_shapes(workdir, plan):
    import cal_steps

    report = plan.aot(*cal_steps.small(), topology="cpu:8")
    timing = time_step(report.program.executable, cal_steps.small()[1:], repeats=1,
                       warmup=0)
    assert len(timing.samples) == 1


def test_calibrating_on_cpu_devices_is_p819_and_writes_no_file(workdir, capsys):
    code = main(["cost", "plan.kd", "--calibrate", "v5e.json", "--step", "cal_steps:small"])
    assert code == 2
    err = capsys.readouterr().err
    assert "error[P819]" in err and "CPU device" in err
    assert not (workdir / "v5e.json").exists()


@pytest.mark.parametrize("words, says", [
    (["--calibrate", "out.json", "--step", "cal_steps:small", "--topology", "cpu:8"],
     "takes no --topology"),
    (["--calibrate", "out.json"], "at least one --step"),
    (["--calibrate", "out.json", "--step", "cal_steps:small", "--repeat", "0"],
     "--repeat must be at least 1"),
    (["--step", "cal_steps:small", "--step", "cal_steps:large", "--topology", "cpu:8"],
     "one --step and a --topology"),
    (["--step", "cal_steps:small"], "one --step and a --topology"),
])
def test_a_calibrate_command_line_that_cannot_run_is_exit_2(workdir, capsys, words, says):
    assert main(["cost", "plan.kd", *words]) == 2
    assert says in capsys.readouterr().err


def test_without_a_file_the_chip_is_priced_with_the_calibration_planc_ships(
        workdir, plan, monkeypatch):
    import cal_steps
    from planc.targets.cost import calibration

    (workdir / "v5e.json").write_text(json.dumps({
        "schema": "planc.calibration/1", "chip": "v5e", "overlap": 0.0,
        "efficiency": {"matmul": 0.5, "hbm": 0.5, "ici": 0.5, "dcn": 0.5}}))
    monkeypatch.setattr(calibration, "SHIPPED", str(workdir))
    shipped = plan.cost(*cal_steps.small(), topology="cpu:8")
    peaks = plan.cost(*cal_steps.small(), topology="cpu:8", calibration="none")
    assert shipped.to_dict()["calibration"]["file"] == "planc:calibrations/v5e.json"
    assert peaks.to_dict()["calibration"] is None
    assert shipped.upper_s == pytest.approx(2 * peaks.upper_s)


def test_the_printed_table_shows_each_step_measured_beside_its_estimates(workdir, plan):
    from planc.reports.cost import render_calibration

    steps = measured(plan, ["cal_steps:small", "cal_steps:large"])
    doc = CalibrationRun(steps, fit([s.sample for s in steps]), chip_named("v5e"), "cpu", 8,
                         "0.10.2", "2026-12-06", "plan.kd", 3).document()
    text = render_calibration(doc, "v5e.json")
    assert text.startswith("calibration of v5e (cpu x 8, JAX 0.10.2, 2026-12-06) written to "
                           "v5e.json")
    rows = [line.split() for line in text.splitlines() if line.startswith("  cal_steps:")]
    assert [r[0] for r in rows] == ["cal_steps:small", "cal_steps:large"]
    assert all(r[-1].endswith("%") for r in rows)

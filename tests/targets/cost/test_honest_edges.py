"""The edges of `planc cost`'s report said as they are: an upper bound planc cannot know
is unknown, a budget met only by a lower bound is not "fits", and a collective over a
reshaped parameter is still that parameter's."""

import json

import jax
import jax.numpy as jnp
import pytest

import planc
from planc.reports.cost import render_text

F32 = jnp.float32
WIDTH, BATCH = 512, 512


def converging_step(params, opt_state, x):
    def cond(carry):
        return jnp.sum(carry[0]) < 1e6  # ends on a value: no trip count to read
    def body(carry):
        h, w = carry
        return jnp.tanh(h @ w) + 1.0, w
    h, _ = jax.lax.while_loop(cond, body, (x, params["w"]))
    return params, opt_state, jnp.sum(h)


PARAMS = {"w": jax.ShapeDtypeStruct((WIDTH, WIDTH), F32)}
BATCH_SHAPE = jax.ShapeDtypeStruct((BATCH, WIDTH), F32)


def converging(budget=""):
    plan = planc.loads("mesh(data = 8)\ndata_parallel\n" + budget, file="loop.kd")
    return plan.cost(converging_step, PARAMS, {}, BATCH_SHAPE, topology="cpu:8")


@pytest.fixture(scope="module")
def within_budget():
    return converging("budget(step = 10 s)\n")


def test_a_loop_of_unknown_trip_count_leaves_the_upper_bound_unknown(within_budget):
    report = within_budget
    assert not report.exact and report.upper_s is None
    assert report.to_dict()["time"]["upper_s"] is None
    assert json.loads(json.dumps(report.to_dict()))["time"]["upper_s"] is None
    assert "upper unknown" in render_text(report)
    from planc.reports import aot as aot_reports
    from planc.reports.cost import document
    from planc.reports.html.data import cost_data

    page = cost_data(document(report, []), aot_reports.document(report.aot, []))
    assert ["upper", None] in page["cost"]["time"]  # the page writes null as "unknown"
    # The shares are still fractions of what was counted.
    assert 0 < sum(share for _, share in report.bottleneck) <= 1 + 1e-9


def test_a_loop_of_unknown_length_makes_every_figure_a_labelled_lower_bound():
    report = converging()
    assert not report.exact and report.to_dict()["exact"] is False
    assert [d.code for d in report.diagnostics if d.code == "P814"] == ["P814"]


def test_a_budget_met_only_by_a_lower_bound_is_p823_not_fits(within_budget):
    report = within_budget
    [d] = [d for d in report.diagnostics if d.code == "P823"]
    assert d.severity.value == "warning" and d.span.line == 3
    assert "only by a lower bound" in d.message
    assert report.fits is None and report.to_dict()["budget"]["fits"] is None
    text = render_text(report)
    assert "fits" not in text.split("budget(step")[1] and "unknown" in text.split("budget(step")[1]


def test_a_lower_bound_already_over_the_budget_is_p813_not_p823():
    report = converging("budget(step = 1 us)\n")
    codes = [d.code for d in report.diagnostics]
    assert "P813" in codes and "P823" not in codes and report.fits is False


def test_a_collective_over_a_reshaped_parameter_is_tied_to_it():
    # The step views the (2400, 400) weight as (8, 300, 400): XLA gathers it in that
    # shape, and sums its gradient whole in a transposed one.
    plan = planc.loads('mesh(fsdp = 8)\nmodel_parallel(batch = fsdp)\n'
                       'layout { "w" -> (fsdp, _) }\n', file="reshape.kd")

    def step(params, opt_state, x):
        def loss(w):
            return jnp.mean(jnp.einsum("bkd,kfd->bf", x, w.reshape(8, 300, 400)) ** 2)
        return {"w": params["w"] - 0.1 * jax.grad(loss)(params["w"])}, opt_state, None

    report = plan.cost(step, {"w": jax.ShapeDtypeStruct((2400, 400), F32)}, {},
                       jax.ShapeDtypeStruct((16, 8, 400), F32), topology="cpu:8")
    [gather] = [t for t in report.terms if t.name == "all-gather over fsdp"]
    assert (8, 300, 400) in gather.collective.shapes
    assert gather.variables == ("params/w",) and gather.rules


def test_the_json_report_is_byte_identical_from_process_to_process(tmp_path):
    # Two processes with different hash seeds, with a calibration, an unknown upper
    # bound and a budget met only by a lower bound in the document.
    import os
    import subprocess
    import sys

    from conftest import ROOT

    (tmp_path / "loop.kd").write_text("mesh(data = 8)\ndata_parallel\nbudget(step = 10 s)\n")
    (tmp_path / "loopstep.py").write_text(
        "import jax, jax.numpy as jnp\n"
        "def step(p, s, x):\n"
        "    def body(c):\n"
        "        return jnp.tanh(c[0] @ c[1]) + 1.0, c[1]\n"
        "    h, _ = jax.lax.while_loop(lambda c: jnp.sum(c[0]) < 1e6, body, (x, p['w']))\n"
        "    return p, s, jnp.sum(h)\n"
        f"def build():\n    return step, {{'w': jax.ShapeDtypeStruct(({WIDTH}, {WIDTH}), "
        f"jnp.float32)}}, {{}}, jax.ShapeDtypeStruct(({BATCH}, {WIDTH}), jnp.float32)\n")
    (tmp_path / "cal.json").write_text(json.dumps(
        {"schema": "planc.calibration/1", "chip": "v5e", "overlap": 0.5,
         "efficiency": {"matmul": 0.6, "hbm": 0.7, "ici": 0.8, "dcn": 0.9}}))
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed,
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
        done = subprocess.run(
            [sys.executable, "-m", "planc", "cost", "loop.kd", "--step", "loopstep:build",
             "--topology", "cpu:8", "--calibration", "cal.json", "--format", "json"],
            cwd=tmp_path, env=env, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr.decode()
        outs.append(done.stdout)
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    assert doc["time"]["upper_s"] is None and doc["budget"]["fits"] is None
    assert "P823" in [d["code"] for d in doc["diagnostics"]]

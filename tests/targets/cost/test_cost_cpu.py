"""`plan.cost` and `planc cost` on `cpu:8`: FLOPs from the optimized HLO with loops' trip
counts multiplied in, collectives per mesh axis, bounds, the bottleneck by plan rule,
`budget(step)`, calibration files."""

import json

import jax
import jax.numpy as jnp
import pytest

import planc
from planc.cli import main
from planc.targets.cost.model import moved_bytes

F32 = jnp.float32
LAYERS, WIDTH, BATCH = 6, 256, 64

SCANNED = """
plan scanned
mesh(fsdp = 4, tp = 2)
model_parallel(batch = fsdp)
layout {
    "w" -> (_, fsdp, tp)
}
"""


def scanned_step(params, opt_state, x):
    def loss(w):
        def body(h, layer):
            return jnp.tanh(h @ layer), None
        h, _ = jax.lax.scan(body, x, w)
        return jnp.mean(h ** 2)
    grad = jax.grad(loss)(params["w"])
    return {"w": params["w"] - 0.1 * grad}, opt_state, None


PARAMS = {"w": jax.ShapeDtypeStruct((LAYERS, WIDTH, WIDTH), F32)}
BATCH_SHAPE = jax.ShapeDtypeStruct((BATCH, WIDTH), F32)


@pytest.fixture(scope="module")
def report():
    return planc.loads(SCANNED, file="scanned.kd").cost(scanned_step, PARAMS, {}, BATCH_SHAPE,
                                                          topology="cpu:8", calibration="none")


def test_matmul_flops_count_every_trip_of_the_scan(report):
    # Forward, and the backward's two matmuls, per layer; each device holds 1/8 of each.
    analytic = 3 * LAYERS * 2 * BATCH * WIDTH * WIDTH // 8
    assert report.counts.flops["matmul"] == analytic
    assert report.exact


def test_on_cpu_no_algorithm_is_recorded_and_each_collective_is_priced_as_a_line(report):
    # XLA:CPU writes no collective_algorithm_config: the placement's one link prices it
    rows = report.to_dict()["collectives"]
    assert rows and all(c["algorithm"] is None and c["links"] == 1 for c in rows)


def test_the_bounds_hold_the_estimate_between_them(report):
    assert 0 < report.lower_s <= report.estimate_s <= report.upper_s
    doc = report.to_dict()
    assert doc["time"] == {"lower_s": report.lower_s, "upper_s": report.upper_s,
                           "estimate_s": report.estimate_s}
    assert 0 <= doc["mfu"] <= 1


def test_a_small_steps_mfu_reads_in_two_significant_digits_never_zero(report):
    from planc.reports.cost import render_text
    from planc.targets.cost.report import percent_text

    assert 0 < report.mfu < 0.1  # a tiny step on simulated devices priced as a v5e
    head = render_text(report).splitlines()[0]
    assert head.endswith(f"MFU {percent_text(report.mfu)}") and "MFU 0%" not in head
    assert percent_text(0.0042) == "0.42%" and percent_text(0.47) == "47%"


def test_bottleneck_shares_are_fractions_of_the_upper_bound_summing_to_at_most_one(report):
    shares = [b["share"] for b in report.to_dict()["bottleneck"]]
    assert shares == sorted(shares, reverse=True)
    assert 0 < sum(shares) <= 1 + 1e-9


def test_the_weights_gathered_over_fsdp_are_named_with_their_rule(report):
    gathers = [t for t in report.terms if t.name == "all-gather over fsdp"]
    assert gathers and gathers[0].variables == ("params/w",)
    assert gathers[0].rules == ('"w" -> (_, fsdp, tp) at scanned.kd:6',)


def test_a_gradient_summed_whole_before_its_shard_is_sliced_is_named_with_its_rule():
    # float32 weights cast to bfloat16 in the step: XLA sums each layer's whole gradient
    # over fsdp and slices the shard after the convert, an all-reduce of the whole
    # weight's shape, not of its shard; it is still that weight's gradient.
    def step(params, opt_state, x):
        def loss(w):
            def body(h, layer):
                return jnp.tanh(h @ layer.astype(jnp.bfloat16)), None
            h, _ = jax.lax.scan(body, x, w)
            return jnp.mean(h.astype(F32) ** 2)
        return {"w": params["w"] - 0.1 * jax.grad(loss)(params["w"])}, opt_state, None

    plan = planc.loads('mesh(fsdp = 8)\nmodel_parallel(batch = fsdp)\n'
                       'layout {\n    "w" -> (_, fsdp, _)\n}\n', file="cast.kd")
    report = plan.cost(step, PARAMS, {}, jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.bfloat16),
                       topology="cpu:8")
    sums = [t for t in report.terms if t.name == "all-reduce over fsdp"]
    assert sums and (WIDTH, WIDTH) in sums[0].collective.shapes  # the whole layer's
    assert sums[0].variables == ("params/w",)
    assert sums[0].rules == ('"w" -> (_, fsdp, _) at cast.kd:4',)


def test_collectives_run_once_per_layer_of_the_scan(report):
    over_fsdp = [t.collective for t in report.terms
                 if t.collective is not None and t.collective.axes == ("fsdp",)
                 and t.collective.kind == "all-gather"]
    assert over_fsdp and over_fsdp[0].count % LAYERS == 0


@pytest.mark.parametrize("kind, result, group, sent", [
    ("all-gather", 4096, 4, 3072), ("reduce-scatter", 1024, 4, 3072),
    ("all-reduce", 4096, 4, 6144), ("all-to-all", 4096, 4, 3072),
    ("collective-permute", 4096, None, 4096), ("all-reduce", 4096, 1, 0)])
def test_each_algorithm_sends_its_textbook_share(kind, result, group, sent):
    assert moved_bytes(kind, result, group) == sent


def test_the_json_document_has_the_designs_keys_and_is_deterministic(tmp_path, monkeypatch,
                                                                     capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scanned.kd").write_text(SCANNED)
    (tmp_path / "steps.py").write_text(
        "import jax, jax.numpy as jnp\n"
        "def step(p, s, x):\n"
        "    def loss(w):\n"
        "        def body(h, layer):\n"
        "            return jnp.tanh(h @ layer), None\n"
        "        return jnp.mean(jax.lax.scan(body, x, w)[0] ** 2)\n"
        "    return {'w': p['w'] - 0.1 * jax.grad(loss)(p['w'])}, s, None\n"
        f"def build():\n    return step, {{'w': jax.ShapeDtypeStruct(({LAYERS}, {WIDTH}, "
        f"{WIDTH}), jnp.float32)}}, {{}}, jax.ShapeDtypeStruct(({BATCH}, {WIDTH}), "
        "jnp.float32)\n")
    words = ["cost", "scanned.kd", "--step", "steps:build", "--topology", "cpu:8",
             "--format", "json"]
    assert main(words) == 0
    first = capsys.readouterr().out
    assert main(words) == 0
    assert capsys.readouterr().out == first
    doc = json.loads(first)
    # a cpu:N compile is priced as a v5e, with the calibration planc ships for it
    assert doc["schema"] == "planc.cost/1"
    assert doc["calibration"]["file"] == "planc:calibrations/v5e.json"
    assert set(doc["time"]) == {"lower_s", "upper_s", "estimate_s"}
    assert {"total", "matmul", "elementwise", "custom"} <= set(doc["flops"])
    assert doc["hbm_bytes"] == sum(doc["hbm_bytes_by_class"].values()) > 0
    assert all({"kind", "axes", "bytes", "time_s"} <= set(c) for c in doc["collectives"])
    assert all({"share", "variables", "rules"} <= set(b) for b in doc["bottleneck"])


def test_a_step_over_its_time_budget_is_p813_at_the_budget_line():
    plan = planc.loads(SCANNED + "budget(step = 1 us)\n", file="scanned.kd")
    report = plan.cost(scanned_step, PARAMS, {}, BATCH_SHAPE, topology="cpu:8")
    [d] = [d for d in report.diagnostics if d.code == "P813"]
    assert d.is_error and d.span.line == 8 and "budget(step = 1 us)" in d.message
    assert report.fits is False and not report.ok


def test_a_generous_time_budget_fits():
    plan = planc.loads(SCANNED + "budget(step = 10 s)\n")
    report = plan.cost(scanned_step, PARAMS, {}, BATCH_SHAPE, topology="cpu:8")
    assert report.fits is True and report.ok


def test_a_calibration_slows_the_estimate_by_its_efficiencies(tmp_path, report):
    path = tmp_path / "v5e.json"
    path.write_text(json.dumps({"schema": "planc.calibration/1", "chip": "v5e",
                                "efficiency": {"matmul": 0.5, "hbm": 0.5, "ici": 0.5,
                                               "dcn": 0.5}, "overlap": 0.0}))
    slower = planc.loads(SCANNED).cost(scanned_step, PARAMS, {}, BATCH_SHAPE,
                                       topology="cpu:8", calibration=str(path))
    assert slower.upper_s == pytest.approx(2 * report.upper_s)
    assert slower.lower_s == pytest.approx(report.lower_s)
    assert slower.to_dict()["calibration"]["file"] == str(path)


@pytest.mark.parametrize("content, says", [
    ("{", "is not JSON"),
    ('{"schema": "other"}', "is not a `planc.calibration/1` document"),
    ('{"schema": "planc.calibration/1", "chip": "v6e", "efficiency": {"matmul": 0.5}}',
     "is for chip `v6e`"),
    ('{"schema": "planc.calibration/1", "chip": "v5e", "efficiency": {"matmul": 1.5}}',
     "not a fraction"),
])
def test_a_bad_calibration_file_is_p812_and_exit_2(tmp_path, monkeypatch, capsys, content, says):
    path = tmp_path / "cal.json"
    path.write_text(content)
    with pytest.raises(planc.PlanError) as exc:
        planc.loads(SCANNED).cost(scanned_step, PARAMS, {}, BATCH_SHAPE, topology="cpu:8",
                                  calibration=str(path))
    [d] = exc.value.diagnostics
    assert d.code == "P812" and says in d.message


def test_an_unknown_chip_to_price_a_cpu_compile_is_p815():
    with pytest.raises(planc.PlanError) as exc:
        planc.loads(SCANNED).cost(scanned_step, PARAMS, {}, BATCH_SHAPE, topology="cpu:8",
                                  chip="v99")
    assert [d.code for d in exc.value.diagnostics] == ["P815"]


def test_a_scans_hbm_bytes_grow_with_its_layers_not_their_square():
    # Each iteration reads its layer's slice of the stacked weights and writes its
    # residuals into the stack in place: charging it the whole stack made the bytes
    # grow as the square of the layers (141, 492, 1823 MB at 8, 16, 32 layers).
    def build(layers):
        def loss(w, x):
            def body(h, layer):
                return jnp.tanh(h @ layer), None
            return jnp.mean(jax.lax.scan(body, x, w)[0] ** 2)

        def step(params, opt_state, x):
            return {"w": params["w"] - 0.1 * jax.grad(loss)(params["w"], x)}, opt_state, None
        return (step, {"w": jax.ShapeDtypeStruct((layers, WIDTH, WIDTH), F32)}, {},
                jax.ShapeDtypeStruct((512, WIDTH), F32))

    plan = planc.loads("mesh(data = 8)  data_parallel")
    hbm = [plan.cost(*build(n), topology="cpu:8").counts.total_hbm_bytes for n in (8, 16, 32)]
    assert hbm[1] / hbm[0] < 2.1 and hbm[2] / hbm[1] < 2.1

"""`plan.cost(model, ...)` and `planc cost --step` for a Keras 3 model's own training step,
compiled as `plan.aot` compiles it (`keras_step`), on one small functional MLP (`cpu:8`)."""

import json

import jax
import jax.numpy as jnp
import pytest

import planc
from planc.cli import main

from ..mlp_plans import FSDP_TP

keras = pytest.importorskip("keras")

WIDTH, HIDDEN, BATCH = 32, 64, 16

PLAN = "\nplan keras_mlp" + FSDP_TP

# The builders `--step` names. A functional model's variable paths are its layers' names,
# so the plan's rules read `dense_0/kernel`.
STEPS = f'''
import jax, jax.numpy as jnp, keras

WIDTH, HIDDEN, BATCH = {WIDTH}, {HIDDEN}, {BATCH}


def model(compiled=True):
    inputs = keras.Input((WIDTH,))
    hidden = keras.layers.Dense(HIDDEN, activation="tanh", name="dense_0")(inputs)
    m = keras.Model(inputs, keras.layers.Dense(WIDTH, name="dense_1")(hidden))
    if compiled:
        m.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mean_squared_error")
    return m


def batch(x_width=WIDTH, y_width=WIDTH):
    return (jax.ShapeDtypeStruct((BATCH, x_width), jnp.float32),
            jax.ShapeDtypeStruct((BATCH, y_width), jnp.float32))


def compiled():
    return model(), batch()


def given():
    return model(compiled=False), batch(), keras.optimizers.SGD(0.1), "mean_squared_error"


def uncompiled():
    return model(compiled=False), batch()


def narrow_x():
    return model(), batch(x_width=WIDTH - 1)


def wide_y():
    return model(), batch(y_width=WIDTH + 1)


def alone():
    return model()


def three():
    return model(), batch(), "adam"


def text():
    return "a model"
'''


# The in-process tests build the model and batch with the very builders `--step` imports.
BUILDERS = {}
exec(STEPS, BUILDERS)
model, batch = BUILDERS["model"], BUILDERS["batch"]

@pytest.fixture(scope="module")
def plan():
    return planc.loads(PLAN, file="keras_mlp.kd")


@pytest.fixture(scope="module")
def report(plan):
    return plan.cost(model(compiled=False), batch=batch(),
                     optimizer=keras.optimizers.Adam(1e-3), loss="mean_squared_error",
                     topology="cpu:8")


@pytest.fixture
def steps(tmp_path, monkeypatch):
    (tmp_path / "keras_cost_steps.py").write_text(STEPS)
    (tmp_path / "keras_mlp.kd").write_text(PLAN)
    monkeypatch.chdir(tmp_path)
    return str(tmp_path / "keras_mlp.kd")


def cli(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_keras_model_s_step_is_costed_from_the_compile_plan_aot_makes(plan, report):
    compiled = plan.aot(model(compiled=False), batch=batch(),
                        optimizer=keras.optimizers.Adam(1e-3),
                        loss="mean_squared_error", topology="cpu:8")
    assert report.aot.memory == compiled.memory
    assert 0 < report.lower_s <= report.estimate_s <= report.upper_s
    # Two layers' forward and weight gradients, and the input gradient of the second only
    # (the batch needs none): five matmuls, each device 1/8 of each (fsdp x model).
    assert report.counts.flops["matmul"] == 5 * (2 * BATCH * WIDTH * HIDDEN) // 8


def test_the_bottleneck_names_the_keras_variable_and_the_plan_rule(report):
    rows = [b for b in report.to_dict()["bottleneck"] if b["variables"]]
    assert any("trainable/dense_0/kernel" in b["variables"] for b in rows)
    assert any(r.startswith('"dense_0/kernel" -> (fsdp, model)') for b in rows
               for r in b["rules"])


def test_a_batch_whose_x_the_model_refuses_is_p826_with_the_model_s_input_shape(plan):
    with pytest.raises(planc.PlanError) as info:
        plan.cost(model(), batch=batch(x_width=WIDTH - 1), topology="cpu:8")
    (d,) = info.value.diagnostics
    assert d.code == "P826" and f"float32[{BATCH}, {WIDTH - 1}]" in d.message
    assert f"(None, {WIDTH})" in " ".join(d.help)


def test_cost_step_takes_a_builder_returning_a_compiled_keras_model_and_its_batch(
        steps, capsys):
    code, out, err = cli(capsys, "cost", steps, "--step", "keras_cost_steps:compiled",
                         "--topology", "cpu:8", "--format", "json")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["time"]["lower_s"] <= doc["time"]["estimate_s"] <= doc["time"]["upper_s"]
    assert any("trainable/dense_0/kernel" in b["variables"] for b in doc["bottleneck"])


def test_a_keras_builder_is_built_abstractly_its_optimizer_slots_shapes_only(steps, plan):
    from planc.targets.aot.step_builder import build_step

    built = build_step(plan.ir, "keras_cost_steps:compiled")
    assert built.abstractly and built.parameter_count == 4
    slots = built.step.optimizer.variables
    assert slots and all(isinstance(v.value, jax.core.Tracer) for v in slots)


def test_aot_step_takes_a_builder_returning_the_model_batch_optimizer_and_loss(steps, capsys):
    code, out, err = cli(capsys, "aot", steps, "--step", "keras_cost_steps:given",
                         "--topology", "cpu:8")
    assert code == 0 and "plan `keras_mlp` on cpu:8" in out, err


@pytest.mark.parametrize("builder, code, says", [
    ("uncompiled", "P810", "no optimizer"),
    ("narrow_x", "P826", "does not fit the model's inputs"),
    ("wide_y", "P826", f"does not fit the model's output (float32[{BATCH}, {WIDTH}])"),
    ("alone", "P806", "returns a Keras model without its batch"),
    ("three", "P806", "returns a Keras model and 2 more"),
    ("text", "P806", "returns a str, not `(step, params, opt_state, batch)` or `(model, batch)`"),
])
def test_a_keras_builder_that_cannot_be_costed_is_a_coded_diagnostic_with_help(
        steps, capsys, builder, code, says):
    got, out, err = cli(capsys, "cost", steps, "--step", f"keras_cost_steps:{builder}",
                        "--topology", "cpu:8")
    assert got == 1 and out == "" and "Traceback" not in err
    assert f"error[{code}]" in err and says in err and "= help: " in err, err


def test_suggest_search_refuses_a_keras_builder_with_p827(steps, capsys):
    got, out, err = cli(capsys, "suggest", "--search", "--step", "keras_cost_steps:compiled",
                        "--topology", "cpu:8")
    assert got == 1 and out == "" and "error[P827]" in err
    assert "planc cost --step keras_cost_steps:compiled" in err

"""`plan.aot(model, batch=..., optimizer=..., loss=...)`: a Keras model's own stateless
training step compiled ahead of time, on a tiny keras-hub backbone (`cpu:8`)."""

import jax
import jax.numpy as jnp
import pytest

import planc
from conftest import PLANS

keras = pytest.importorskip("keras")
keras_hub = pytest.importorskip("keras_hub")

HIDDEN, SEQ, BATCH = 16, 12, 8


@pytest.fixture(scope="module")
def backbone():
    return keras_hub.models.LlamaBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=4, hidden_dim=HIDDEN,
        intermediate_dim=32, num_key_value_heads=2, tie_word_embeddings=False)


def batch():
    x = {"token_ids": jax.ShapeDtypeStruct((BATCH, SEQ), jnp.int32),
         "padding_mask": jax.ShapeDtypeStruct((BATCH, SEQ), jnp.int32)}
    return x, jax.ShapeDtypeStruct((BATCH, SEQ, HIDDEN), jnp.float32)


@pytest.fixture(scope="module")
def report(backbone):
    plan = planc.load_plan(PLANS / "keras_hub_llama.kd")
    optimizer = keras.optimizers.Adam(1e-3)
    out = plan.aot(backbone, batch=batch(), optimizer=optimizer, loss="mean_squared_error",
                   topology="cpu:8")
    assert not optimizer.built  # its slots were shapes only, on a rebuilt copy
    return out


def test_keras_s_step_compiles_with_the_plan_s_layouts(report, backbone):
    assert report.ok and report.mesh == {"batch": 2, "model": 4}
    sizes = dict(report.largest_variables)
    # (64, 16) embeddings over (model, batch): 64/4 x 16/2 floats on each device.
    embed = 64 // 4 * (16 // 2) * 4
    assert sizes.get("trainable/token_embedding/embeddings", embed) == embed
    rules = dict(report.largest_rules)
    # The rule's variable and the Adam slots Keras made for it (momentum, velocity).
    (label,) = [r for r in rules if r.startswith('"token_embedding/embeddings"')]
    assert rules[label] == 3 * embed
    assert report.memory["argument"] > 0 and report.memory["alias"] > 0
    assert any(c.axes and "model" in c.axes for c in report.collectives)


def test_a_model_without_an_optimizer_or_a_loss_is_p810(backbone):
    plan = planc.load_plan(PLANS / "keras_hub_llama.kd")
    for kwargs, says in (({"loss": "mse"}, "no optimizer"),
                         ({"optimizer": keras.optimizers.SGD()}, "no loss")):
        with pytest.raises(planc.PlanError) as info:
            plan.aot(backbone, batch=batch(), topology="cpu:8", **kwargs)
        (d,) = info.value.diagnostics
        assert d.code == "P810" and says in d.message
    with pytest.raises(planc.PlanError) as info:
        plan.aot(backbone, batch=(1, 2, 3, 4), optimizer=keras.optimizers.SGD(), loss="mse",
                 topology="cpu:8")
    assert info.value.diagnostics[0].code == "P810"

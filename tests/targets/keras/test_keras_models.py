"""Real Keras models under `plan.activate()` on 8 simulated CPU devices.

Every variable a model creates inside the scope must be laid out exactly as planc
resolves it (and as `planc explain` reports), training must give the single-device
loss, optimizer slots must follow their parameters, bookkeeping scalars must stay
replicated, and a plan that cannot fit a variable must be refused by planc before
Keras or XLA fail.
"""

import json

import numpy as np
import pytest

keras = pytest.importorskip("keras")
from jax.sharding import PartitionSpec as P  # noqa: E402

import planc  # noqa: E402
from planc.cli import main as planc_main  # noqa: E402
from planc.sources import load_variables, write_manifest  # noqa: E402

PLAN = """\
plan models
mesh(batch = 2, model = 4)
model_parallel(batch = batch)
layout {
    "tok/embeddings"                      -> (model, batch)
    "mha/(query|key|value)/kernel"        -> (_, model, _)
    "mha/(query|key|value)/bias"          -> (model, _)
    "mha/attention_output/kernel"         -> (model, _, _)
    "ffw/kernel"                          -> (_, model)
    "ffw/bias"                            -> (model)
    "head/kernel"                         -> (model, _) | replicated
    "seq/dense_[ab]/kernel"               -> (batch, model)
    "sub/(up|down)/kernel"                -> (_, model) | (model, _)
    default                               -> replicated
}
outputs {
    "ffw" -> (batch, _, model)
}
"""

SEQ_LEN, VOCAB, WIDTH = 8, 64, 32


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("plans") / "models.kd"
    path.write_text(PLAN)
    return planc.load_plan(path)


def functional_model(seed=0):
    """Embedding, MultiHeadAttention, LayerNormalization, EinsumDense and Dense."""
    keras.utils.set_random_seed(seed)
    tokens = keras.Input((SEQ_LEN,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, WIDTH, name="tok")(tokens)
    x = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8, name="mha")(x, x)
    x = keras.layers.LayerNormalization(name="ln")(x)
    x = keras.layers.EinsumDense("btd,df->btf", output_shape=(None, 64), bias_axes="f",
                                 activation="relu", name="ffw")(x)
    out = keras.layers.Dense(16, name="head")(x)
    return keras.Model(tokens, out)


def sequential_model():
    return keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, name="dense_a"),
                             keras.layers.Dense(8, name="dense_b")], name="seq")


class Sub(keras.Model):
    def __init__(self):
        super().__init__(name="sub")
        self.up = keras.layers.EinsumDense("bd,df->bf", output_shape=(64,), name="up")
        self.norm = keras.layers.LayerNormalization(name="norm")
        self.down = keras.layers.Dense(10, name="down")

    def build(self, input_shape):
        self.up.build(input_shape)
        self.norm.build((None, 64))
        self.down.build((None, 64))

    def call(self, x):
        return self.down(self.norm(self.up(x)))


def subclassed_model():
    model = Sub()
    model.build((None, 16))
    return model


@pytest.fixture(scope="module")
def built(plan):
    """The three models and the distribution they were built under."""
    with plan.activate() as dist:
        models = {"functional": functional_model(), "sequential": sequential_model(),
                  "subclassed": subclassed_model()}
    return dist, models


def data(n=16, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, VOCAB, size=(n, SEQ_LEN)).astype("int32")
    y = rng.normal(size=(n, SEQ_LEN, 16)).astype("float32")
    return x, y


def spec(variable):
    return variable.value.sharding.spec


def weights_of(model):
    return [np.asarray(v.value) for v in model.weights]


def set_weights(model, values):
    """Assign `values` in place: each variable keeps the layout it was born with."""
    for v, value in zip(model.weights, values, strict=True):
        v.assign(value)


@pytest.mark.parametrize("kind", ["functional", "sequential", "subclassed"])
def test_every_variable_is_laid_out_as_planc_resolves_it(plan, built, kind):
    model = built[1][kind]
    resolved = plan.resolve(model)
    assert set(resolved) == {v.path for v in model.variables}
    for v in model.variables:
        assert spec(v) == P(*resolved[v.path].axes), v.path


def test_the_models_use_every_rule_and_real_splits(plan, built):
    # Guards the test above against passing vacuously with everything replicated.
    paths = {v.path: spec(v) for m in built[1].values() for v in m.variables}
    assert paths["tok/embeddings"] == P("model", "batch")
    assert paths["mha/query/kernel"] == P(None, "model", None)
    assert paths["seq/dense_a/kernel"] == P("batch", "model")
    assert paths["sub/up/kernel"] == P(None, "model")
    assert paths["sub/down/kernel"] == P("model", None)  # (64, 10): 10 % 4 != 0
    assert paths["head/kernel"] == P("model", None)


def test_explain_json_reports_the_axes_keras_applied(plan, built, tmp_path, capsys):
    model = built[1]["functional"]
    manifest = tmp_path / "model.json"
    write_manifest(load_variables(model), manifest)
    capsys.readouterr()
    code = planc_main(["explain", plan.file, "--model", str(manifest), "--devices", "8",
                       "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["schema"] == "planc.explain/1"
    axes = {row["path"]: row["axes"] for row in doc["variables"]}
    for v in model.variables:
        expected = [list(e) if isinstance(e, tuple) else e for e in spec(v)]
        expected += [None] * (len(v.shape) - len(expected))
        assert axes[v.path] == expected, v.path


def test_output_rule_lays_out_the_layer_activation(built):
    dist, models = built
    layer = models["functional"].get_layer("ffw")
    with dist.scope():
        out = layer(np.ones((4, SEQ_LEN, WIDTH), "float32"))
    assert out.sharding.spec == P("batch", None, "model")


def test_variable_rules_never_lay_out_activations(built):
    dist, models = built
    layer = models["functional"].get_layer("head")  # `head/kernel` has a rule, no output rule
    with dist.scope():
        out = layer(np.ones((4, SEQ_LEN, 64), "float32"))
    assert dist.get_tensor_layout("head/output") is None
    assert out.sharding.is_fully_replicated


@pytest.fixture(scope="module")
def trained(plan, built):
    """The functional model trained 2 epochs under the plan and on one device, from the
    same weights: (planc model, single-device model, planc losses, single losses)."""
    dist, models = built
    model = models["functional"]
    single = functional_model(seed=0)
    set_weights(model, weights_of(single))
    x, y = data()
    single.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    reference = single.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    with dist.scope():
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return model, single, history.history["loss"], reference.history["loss"]


def test_fit_gives_the_single_device_loss(trained):
    _, _, losses, reference = trained
    assert reference[1] < reference[0]  # it trains
    np.testing.assert_allclose(losses, reference, rtol=1e-4)


def test_fit_keeps_the_plan_layouts(plan, trained):
    model = trained[0]
    resolved = plan.resolve(model)
    for v in model.variables:
        assert spec(v) == P(*resolved[v.path].axes), v.path


def test_optimizer_slots_follow_their_parameter_layout(trained):
    model = trained[0]
    prefix = model.optimizer.name
    slots = {v.path: v for v in model.optimizer.variables}
    checked = 0
    for param in model.trainable_variables:
        for kind in ("momentum", "velocity"):
            slot = slots[f"{prefix}/{param.path.replace('/', '_')}_{kind}"]
            assert spec(slot) == spec(param), slot.path
            checked += 1
    assert checked == 2 * len(model.trainable_variables)


def test_optimizer_and_metric_scalars_stay_replicated(trained):
    model = trained[0]
    scalars = [v for v in model.optimizer.variables + model.metrics_variables if not v.shape]
    prefix = model.optimizer.name
    assert {v.path for v in scalars} >= {f"{prefix}/iteration", f"{prefix}/learning_rate",
                                         "loss/total", "loss/count"}
    assert all(spec(v) == P() for v in scalars)


CATCH_ALL = """\
mesh(batch = 2, model = 4)
model_parallel(batch = batch)
layout { ".*" -> (model, ...) }
"""


def test_bookkeeping_variables_stay_replicated_under_a_catch_all_rule():
    # `.*` -> (model, ...) would be an error on the scalars (rank 0) and on the (2,)
    # seed state (2 % 4): Keras asks the distribution for them too, planc answers
    # "replicated" for optimizer, metric and seed-generator variables.
    plan = planc.loads(CATCH_ALL, file="catch_all.kd")
    with plan.activate():
        model = keras.Sequential([keras.Input((16,)), keras.layers.Dropout(0.5),
                                  keras.layers.Dense(8, name="d")], name="cat")
        model.compile(optimizer="adam", loss="mse")
        model.fit(np.ones((8, 16), "float32"), np.ones((8, 8), "float32"), batch_size=8,
                  verbose=0)
    by_path = {v.path: v for v in model.variables + model.optimizer.variables
               + model.metrics_variables}
    assert spec(by_path["cat/d/kernel"]) == P("model", None)
    seeds = [v for path, v in by_path.items() if path.endswith("/seed_generator_state")]
    assert len(seeds) == 1 and spec(seeds[0]) == P(None)
    prefix = model.optimizer.name
    assert spec(by_path[f"{prefix}/iteration"]) == P()
    assert spec(by_path["loss/count"]) == P()
    assert spec(by_path[f"{prefix}/cat_d_kernel_momentum"]) == P("model", None)


INDIVISIBLE = """\
mesh(batch = 2, model = 4)
model_parallel(batch = batch)
layout {
    "s/bad/kernel" -> (_, model)
    default        -> replicated
}
"""


def test_an_indivisible_dimension_is_refused_by_planc_before_keras(tmp_path):
    path = tmp_path / "indivisible.kd"
    path.write_text(INDIVISIBLE)
    plan = planc.load_plan(path)
    with pytest.raises(planc.PlanError) as caught, plan.activate():
        keras.Sequential([keras.Input((16,)), keras.layers.Dense(6, name="bad")], name="s")
    d = caught.value.errors[0]
    assert d.code == "P303" and d.variable == "s/bad/kernel"
    assert d.span.line == 4
    text = str(caught.value)
    assert "`s/bad/kernel`" in text and f"{path}:4" in text


def test_a_batch_the_batch_axis_does_not_divide_is_refused_by_planc(built):
    dist, models = built
    model = models["sequential"]
    with dist.scope():
        model.compile(optimizer="sgd", loss="mse")
        with pytest.raises(planc.PlanError) as caught:
            model.fit(np.ones((5, 16), "float32"), np.ones((5, 8), "float32"), batch_size=5,
                      verbose=0)
    assert caught.value.errors[0].code == "P312"
    assert "batch of 5" in caught.value.errors[0].message


MULTI_AXIS = """\
mesh(data = 2, fsdp = 2, model = 2)
model_parallel(batch = (data, fsdp))
layout {
    "m/wide/kernel" -> ((data, fsdp), model)
    default         -> replicated
}
"""


def test_multi_axis_dimensions_and_batch_train_on_the_jax_backend():
    plan = planc.loads(MULTI_AXIS, file="multi.kd")
    x = np.random.default_rng(0).normal(size=(8, 16)).astype("float32")
    y = np.random.default_rng(1).normal(size=(8, 4)).astype("float32")

    def build():
        keras.utils.set_random_seed(3)
        return keras.Sequential([keras.Input((16,)), keras.layers.Dense(8, name="wide"),
                                 keras.layers.Dense(4, name="out")], name="m")

    single = build()
    initial = weights_of(single)
    single.compile(optimizer="sgd", loss="mse")
    reference = single.fit(x, y, batch_size=8, epochs=2, verbose=0).history["loss"]
    with plan.activate() as dist:
        model = build()
        set_weights(model, initial)
        model.compile(optimizer="sgd", loss="mse")
        losses = model.fit(x, y, batch_size=8, epochs=2, verbose=0).history["loss"]
        assert dist.get_data_layout((8, 16)).backend_layout.spec == P(("data", "fsdp"), None)
    assert spec(model.get_layer("wide").kernel) == P(("data", "fsdp"), "model")
    np.testing.assert_allclose(losses, reference, rtol=1e-5)

"""End to end on 8 simulated CPU devices: models train under 2-D plans exactly as they
train on one device, with every parameter laid out as the plan says.

Each run: `plan.init` creates parameters and optimizer state born sharded, batches go
through `plan.shard_batch`, and a jitted step keeps the plan's shardings as
`out_shardings`. The same step on one device, from the same initial values, is the
reference: losses must agree to float32 rounding.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import math  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import models_jax as models  # noqa: E402
import planc  # noqa: E402
from conftest import PLANS  # noqa: E402

STEPS = 3

MLP_DATA_MODEL = """
mesh(data = 4, model = 2)
model_parallel(batch = data)
layout {
    "dense_0/kernel" -> (_, model)
    "dense_0/bias"   -> (model)
    "dense_1/kernel" -> (model, _)
    "dense_1/bias"   -> replicated
}
"""

MLP_FSDP_MODEL = """
mesh(fsdp = 4, model = 2)
model_parallel(batch = fsdp)
layout {
    "dense_0/kernel" -> (fsdp, model)
    "dense_0/bias"   -> ((fsdp, model))
    "dense_1/kernel" -> ((fsdp, model), _)
    "dense_1/bias"   -> replicated
}
"""

TRANSFORMER_FSDP_MODEL = """
mesh(fsdp = auto, model = 2)
model_parallel(batch = fsdp)
layout {
    "params/embed"                -> ((fsdp, model), _)
    "params/layers/attn/w(q|k|v)" -> (..., fsdp, model, _)
    "params/layers/attn/wo"       -> (..., model, _, fsdp)
    "params/layers/mlp/w_in"      -> (..., fsdp, model)
    "params/layers/mlp/w_out"     -> (..., model, fsdp)
    "params/.*norm.*"             -> replicated
    "params/unembed"              -> (_, (fsdp, model))
}
"""


def _mlp_batch():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((16, 16), np.float32),
            "y": rng.standard_normal((16, 8), np.float32)}


def _transformer_batch():
    rng = np.random.default_rng(0)
    cfg = models.Config()
    return {"tokens": rng.integers(0, cfg.vocab, (8, cfg.seq + 1), dtype=np.int32)}


MODELS = {
    "mlp": (models.mlp_init, models.mlp_loss, _mlp_batch),
    "transformer": (models.transformer_init, models.transformer_loss, _transformer_batch),
}
OPTIMIZERS = {"sgd": optax.sgd(0.2), "adam": optax.adam(1e-2)}

# name: (plan, model, optimizer). The same batch every step, so the loss must fall.
RUNS = {
    "mlp-data-model": (MLP_DATA_MODEL, "mlp", "sgd"),
    "mlp-fsdp-model": (MLP_FSDP_MODEL, "mlp", "adam"),
    "transformer-data-model": (str(PLANS / "jax_stacked.kd"), "transformer", "sgd"),
    "transformer-fsdp-model": (TRANSFORMER_FSDP_MODEL, "transformer", "sgd"),
}


def _load(plan):
    return planc.load_plan(plan) if plan.endswith(".kd") else planc.loads(plan)


def _step(loss_fn, opt):
    def step(params, state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss
    return step


_REFERENCE: dict = {}


def _reference(model: str, optimizer: str, initial):
    """Losses and final parameters of the same training on one device, from the same
    initial values (computed once per model and optimizer)."""
    key = (model, optimizer)
    if key not in _REFERENCE:
        _, loss_fn, batch = MODELS[model]
        opt = OPTIMIZERS[optimizer]
        one = jax.devices()[0]
        params = jax.device_put(initial, one)
        state = opt.init(params)
        step = jax.jit(_step(loss_fn, opt))
        data = jax.device_put(batch(), one)
        losses = []
        for _ in range(STEPS):
            params, state, loss = step(params, state, data)
            losses.append(float(loss))
        _REFERENCE[key] = (jax.device_get(initial), losses, params)
    return _REFERENCE[key]


def _train(name):
    """(plan, mesh, sharded losses, reference, sharded final params, initial values)."""
    text, model, optimizer = RUNS[name]
    init, loss_fn, batch = MODELS[model]
    opt = OPTIMIZERS[optimizer]
    plan = _load(text)
    mesh = plan.mesh()

    def make(key):
        params = init(key)
        return params, opt.init(params)

    # An RBG key: XLA compiles its generator several times faster than threefry's on
    # the CPU, and its numbers do not depend on the sharding either (checked below).
    params, state = plan.init(make, jax.random.key(0, impl="rbg"), mesh=mesh)
    initial = jax.device_get(params)
    placement = (plan.shardings(params, mesh), plan.shardings(state, mesh, params=params))
    step = jax.jit(_step(loss_fn, opt), out_shardings=(*placement, None))
    data = plan.shard_batch(batch(), mesh)
    losses = []
    for _ in range(STEPS):
        params, state, loss = step(params, state, data)
        losses.append(float(loss))
    return plan, mesh, losses, _reference(model, optimizer, initial), params, initial


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request):
    return _train(request.param)


def _expected_shard_shape(shape, spec, mesh):
    out = []
    for dim, entry in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
        names = () if entry is None else (entry,) if isinstance(entry, str) else entry
        out.append(dim // math.prod(mesh.shape[a] for a in names))
    return tuple(out)


def _paths(tree):
    from planc.targets.jax.sharding import tree_paths

    return tree_paths(tree)[0]


def test_sharded_training_losses_equal_the_single_device_run(run):
    _, _, losses, (_, reference, _), _, _ = run
    assert len(losses) == STEPS
    np.testing.assert_allclose(losses, reference, rtol=1e-5)
    assert losses[-1] < losses[0]  # it does train


def test_initial_values_do_not_depend_on_the_plan(run):
    # The single-device reference started from the first plan's initial values; every
    # other plan of the same model must have drawn exactly the same numbers.
    _, _, _, (reference_initial, _, _), _, initial = run
    for (path, leaf), (_, ref) in zip(_paths(initial), _paths(reference_initial)):
        np.testing.assert_array_equal(leaf, ref, err_msg=path)


def test_trained_parameters_equal_the_single_device_run(run):
    _, _, _, (_, _, ref_params), params, _ = run
    for (path, leaf), (_, ref) in zip(_paths(params), _paths(ref_params)):
        np.testing.assert_allclose(np.asarray(leaf), np.asarray(ref), rtol=1e-4, atol=1e-6,
                                   err_msg=path)


def test_every_parameter_keeps_the_plan_partition_spec(run):
    plan, _, _, _, params, _ = run
    for path, leaf in _paths(params):
        assert leaf.sharding.spec == plan.partition_spec(path, leaf.shape), path


def test_every_device_holds_the_plan_shard_shape(run):
    plan, mesh, _, _, params, _ = run
    for path, leaf in _paths(params):
        expected = _expected_shard_shape(leaf.shape, plan.partition_spec(path, leaf.shape), mesh)
        assert len(leaf.addressable_shards) == 8
        assert {s.data.shape for s in leaf.addressable_shards} == {expected}, path


def test_some_dimension_is_split_over_two_axes():
    plan = _load(TRANSFORMER_FSDP_MODEL)
    assert plan.partition_spec("params/embed", (32, 16)) == P(("fsdp", "model"), None)
    assert _expected_shard_shape((32, 16), P(("fsdp", "model"), None), plan.mesh()) == (4, 16)

"""End to end on 8 simulated CPU devices: a small decoder-only transformer trains under
a 2-D plan with `explicit` axes and with `auto` axes, through `planc.Plan` and through
the module `planc compile` writes.

Parameters are placed by the plan; hidden states, attention heads and logits go through
`constrain` with the plan's `outputs` rules; under explicit axes the step checks every
constrained value's type-level sharding (`jax.typeof`) while it is traced. The same
step on plain arrays, with no plan and no constraints, is the reference: the losses
must agree to float32 rounding.

The layouts split only dimensions a matmul does not contract (`(_, model)` kernels,
heads over `model`), and the `outputs` rules gather the rest back: under explicit axes
JAX refuses a matmul whose contracting dimensions are split without an explicit
`out_sharding`, and this test is about what planc does, not about that choice.
"""

import importlib.util
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import planc  # noqa: E402
from planc.cli import main  # noqa: E402

VOCAB, DIM, HEADS, HEAD_DIM, FF, SEQ, BATCH, LAYERS, STEPS = 32, 16, 4, 4, 32, 8, 4, 2, 3

PLAN = """
plan tiny_decoder
mesh(data = 2, model = 4)
model_parallel(batch = data)
axis_types {types}
layout {{
    "embed"                -> (_, model)
    "unembed"              -> (_, model)
    "layer_\\d+/w[qkv]"    -> (_, model, _)
    "layer_\\d+/wo"        -> (_, _, model)
    "layer_\\d+/w1"        -> (_, model)
    "layer_\\d+/w2"        -> (_, model)
    "layer_\\d+/ln_\\d"    -> replicated
    "ln_f"                 -> replicated
}}
outputs {{
    "hidden"     -> (data, _, _)
    "heads"      -> (data, _, model, _)
    "attn_out"   -> (data, _, _, _)
    "mlp_hidden" -> (data, _, _)
    "logits"     -> (data, _, _)
}}
"""

EXPECTED_OUTPUTS = {"hidden": P("data", None, None), "heads": P("data", None, "model", None),
                    "attn_out": P("data", None, None, None),
                    "mlp_hidden": P("data", None, None), "logits": P("data", None, None)}


def init_params(seed=0):
    rng = np.random.default_rng(seed)
    normal = lambda *shape: (rng.standard_normal(shape) * 0.2).astype(np.float32)  # noqa: E731
    params = {"embed": normal(VOCAB, DIM), "unembed": normal(DIM, VOCAB),
              "ln_f": np.ones((DIM,), np.float32)}
    for i in range(LAYERS):
        params[f"layer_{i}"] = {
            "wq": normal(DIM, HEADS, HEAD_DIM), "wk": normal(DIM, HEADS, HEAD_DIM),
            "wv": normal(DIM, HEADS, HEAD_DIM), "wo": normal(HEADS, HEAD_DIM, DIM),
            "w1": normal(DIM, FF), "w2": normal(FF, DIM),
            "ln_1": np.ones((DIM,), np.float32), "ln_2": np.ones((DIM,), np.float32)}
    return params


def norm(x, scale):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * scale


def loss_fn(params, tokens, constrain):
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    x = constrain(jax.nn.one_hot(inputs, VOCAB) @ params["embed"], "hidden")
    seq = inputs.shape[1]
    mask = jnp.tril(jnp.ones((seq, seq), bool))
    for i in range(LAYERS):
        p = params[f"layer_{i}"]
        h = norm(x, p["ln_1"])
        q, k, v = (constrain(jnp.einsum("bsd,dhk->bshk", h, p[w]), "heads")
                   for w in ("wq", "wk", "wv"))
        scores = jnp.einsum("bshk,bthk->bhst", q, k) / np.sqrt(HEAD_DIM)
        weights = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
        attn = constrain(jnp.einsum("bhst,bthk->bshk", weights, v), "attn_out")
        x = constrain(x + jnp.einsum("bshk,hkd->bsd", attn, p["wo"]), "hidden")
        h = constrain(jax.nn.gelu(norm(x, p["ln_2"]) @ p["w1"]), "mlp_hidden")
        x = constrain(x + h @ p["w2"], "hidden")
    logits = constrain(norm(x, params["ln_f"]) @ params["unembed"], "logits")
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


def batches():
    rng = np.random.default_rng(1)
    return [rng.integers(0, VOCAB, (BATCH, SEQ + 1)).astype(np.int32) for _ in range(STEPS)]


def train(params, data, constrain, place_batch=lambda b: b):
    step = jax.jit(lambda p, b: sgd(p, b, constrain))
    losses = []
    for batch in data:
        params, loss = step(params, place_batch(batch))
        losses.append(float(loss))
    return params, losses


def sgd(params, batch, constrain):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch, constrain)
    return jax.tree_util.tree_map(lambda p, g: p - 0.5 * g, params, grads), loss


@pytest.fixture(scope="module")
def reference():
    device = jax.devices()[0]
    params = jax.device_put(init_params(), device)
    return train(params, batches(), lambda x, name: x)[1]


def checking(constrain, explicit, seen):
    """`constrain`, noting each constrained value's type-level spec while traced."""
    def wrapped(x, name):
        out = constrain(x, name)
        if explicit:
            seen.append((name, jax.typeof(out).sharding.spec))
        return out
    return wrapped


def type_spec(x, explicit):
    return jax.typeof(x).sharding.spec if explicit else x.sharding.spec


@pytest.mark.parametrize("types", ["explicit", "auto"])
def test_the_plan_trains_as_the_unsharded_run_does(types, reference):
    plan = planc.loads(PLAN.format(types=types))
    explicit = types == "explicit"
    seen = []
    with plan.use():
        params = plan.shard(init_params())
        for path, leaf in planc.targets.jax.sharding.tree_paths(params)[0]:
            assert type_spec(leaf, explicit) == plan.partition_spec(path, leaf.shape), path
        params, losses = train(params, batches(), checking(plan.constrain, explicit, seen),
                               plan.shard_batch)
    np.testing.assert_allclose(losses, reference, rtol=2e-5, atol=1e-6)
    if explicit:
        assert {name for name, _ in seen} == set(EXPECTED_OUTPUTS)
        for name, spec in seen:
            assert spec == EXPECTED_OUTPUTS[name], name
    if explicit:  # the layout is part of the type, so the step keeps it
        mesh = plan.mesh()
        for path, leaf in planc.targets.jax.sharding.tree_paths(params)[0]:
            wanted = NamedSharding(mesh, plan.partition_spec(path, leaf.shape))
            assert leaf.sharding.is_equivalent_to(wanted, leaf.ndim), path


def _compiled(tmp_path, types):
    source = tmp_path / f"tiny_{types}.kd"
    source.write_text(PLAN.format(types=types), encoding="utf-8")
    target = tmp_path / f"tiny_{types}_sharding.py"
    assert main(["compile", str(source), "-o", str(target)]) == 0
    spec = importlib.util.spec_from_file_location(target.stem, target)
    module = importlib.util.module_from_spec(spec)
    sys.modules[target.stem] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("types", ["explicit", "auto"])
def test_the_emitted_module_trains_as_the_plan_does(types, reference, tmp_path):
    module = _compiled(tmp_path, types)
    explicit = types == "explicit"
    assert module.AXIS_TYPES == (types, types)
    seen = []
    with module.use():
        mesh = module.make_mesh()
        params = module.shard(init_params(), mesh)
        for path, leaf in planc.targets.jax.sharding.tree_paths(params)[0]:
            assert type_spec(leaf, explicit) == module.partition_spec(path, leaf.shape), path
        _, losses = train(params, batches(),
                          checking(lambda x, name: module.constrain(x, name, mesh), explicit,
                                   seen),
                          lambda b: jax.device_put(b, module.data_sharding(2, mesh)))
    np.testing.assert_allclose(losses, reference, rtol=2e-5, atol=1e-6)
    if explicit:
        for name, spec in seen:
            assert spec == EXPECTED_OUTPUTS[name], name

"""`plan.pipeline(layer_fn)`: layers stacked on a leading dimension run as the plan's
stages over its pipeline axis, with `ppermute` between positions, on 8 simulated CPU
devices; the loss and the gradients equal the plain `lax.scan`'s, with FSDP or tensor
parallelism inside the stages, for 2 and 4 stages and interleaved ones."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import planc
from planc.diagnostics import PlanError

D, H = 16, 32


def layer(params, x):
    return x + jnp.tanh(x @ params["w1"]) @ params["w2"]


def stacked(layers, key=0):
    k1, k2 = jax.random.split(jax.random.key(key))
    return {"w1": jax.random.normal(k1, (layers, D, H)) / np.sqrt(D),
            "w2": jax.random.normal(k2, (layers, H, D)) / np.sqrt(H)}


def scanned(params, xs):
    return jax.vmap(lambda x: jax.lax.scan(lambda h, p: (layer(p, h), None), x, params)[0])(xs)


def loss_of(run):
    return lambda params, xs: jnp.mean(run(params, xs) ** 2)


PLANS = {
    "2 stages, fsdp inside": ("mesh(pipe = 2, fsdp = 4)\nmodel_parallel(batch = fsdp)\n"
                              "stages(pipe, microbatches = 4) {}\n"
                              'layout {\n  "w1" -> (pipe, fsdp, _)\n  "w2" -> (pipe, _, fsdp)\n}\n'),
    "4 stages, tp inside": ("mesh(pipe = 4, tp = 2)\nmodel_parallel(batch = pipe)\n"
                            "stages(pipe, microbatches = 4, schedule = gpipe) {}\n"
                            'layout {\n  "w1" -> (pipe, _, tp)\n  "w2" -> (pipe, tp, _)\n}\n'),
    "2 x 2 looped BFS, tp inside": (
        "mesh(pipe = 2, tp = 4)\nmodel_parallel(batch = pipe)\n"
        "stages(pipe, microbatches = 4, schedule = looped_bfs(2)) {}\n"
        'layout {\n  "w1" -> (pipe, _, tp)\n  "w2" -> (pipe, tp, _)\n}\n'),
    "2 x 2 interleaved, fsdp inside": (
        "mesh(pipe = 2, fsdp = 4)\nmodel_parallel(batch = fsdp)\n"
        "stages(pipe, microbatches = 4, schedule = interleaved(2)) {}\n"
        'layout {\n  "w1" -> (pipe, fsdp, _)\n  "w2" -> (pipe, _, fsdp)\n}\n'),
}


@pytest.mark.parametrize("name", PLANS)
def test_the_loss_and_gradients_equal_the_plain_scans(name):
    plan = planc.loads(PLANS[name])
    params = plan.shard(stacked(8))
    xs = jax.random.normal(jax.random.key(1), (4, 8, D))
    run = plan.pipeline(layer)
    want_loss, want_grads = jax.jit(jax.value_and_grad(loss_of(scanned)))(params, xs)
    got_loss, got_grads = jax.jit(jax.value_and_grad(loss_of(run)))(params, xs)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
    for k in params:
        np.testing.assert_allclose(got_grads[k], want_grads[k], rtol=1e-4, atol=1e-6)


def test_bfloat16_activations_run_and_equal_the_plain_scans():
    # XLA:CPU (jax 0.10) aborted the process compiling the bfloat16 all-reduce that hands
    # every position the outputs; it is summed in float32 now.
    plan = planc.loads(PLANS["2 stages, fsdp inside"])
    params = plan.shard(jax.tree.map(lambda a: a.astype(jnp.bfloat16), stacked(8)))
    xs = jax.random.normal(jax.random.key(1), (4, 8, D)).astype(jnp.bfloat16)
    got = jax.jit(plan.pipeline(layer))(params, xs)
    assert got.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(got, np.float32),
                               np.asarray(jax.jit(scanned)(params, xs), np.float32),
                               rtol=0.05, atol=0.05)


def test_each_device_of_an_fsdp_group_computes_its_share_of_a_microbatch():
    # 64 rows over fsdp = 4: the layer's first matrix multiplies 16 rows on a device.
    plan = planc.loads(PLANS["2 stages, fsdp inside"])
    params = plan.shard(stacked(8))
    text = jax.jit(plan.pipeline(layer)).lower(params, jnp.ones((4, 64, D))).compile().as_text()
    dots = [line for line in text.splitlines() if " dot(" in line and f",{H}]" in line]
    assert dots and all(f"f32[16,{H}]" in line for line in dots), dots


def test_a_microbatch_the_batch_axes_do_not_divide_is_left_whole_and_still_equal():
    plan = planc.loads(PLANS["2 stages, fsdp inside"])
    params = plan.shard(stacked(8))
    xs = jax.random.normal(jax.random.key(1), (4, 6, D))  # 6 rows over fsdp = 4
    np.testing.assert_allclose(jax.jit(plan.pipeline(layer))(params, xs),
                               jax.jit(scanned)(params, xs), rtol=1e-5, atol=1e-6)


def test_explicit_axes_are_refused_with_P311_before_tracing():
    # Inside shard_map an explicit axis types the loop's carry with its sharding, which
    # changed between iterations: JAX's TypeError, not a diagnostic.
    plan = planc.loads(PLANS["2 stages, fsdp inside"].replace(
        "model_parallel", "axis_types(fsdp = explicit)\nmodel_parallel"))
    with pytest.raises(PlanError) as caught:
        plan.pipeline(layer)
    d = caught.value.diagnostics[0]
    assert d.code == "P311" and "`fsdp`" in d.message and d.span.line == 2


def test_the_activations_move_between_positions_by_collective_permute():
    plan = planc.loads(PLANS["4 stages, tp inside"])
    params = plan.shard(stacked(8))
    xs = jnp.ones((4, 8, D))
    text = jax.jit(plan.pipeline(layer)).lower(params, xs).as_text()
    assert "collective_permute" in text or "collective-permute" in text


def test_a_layer_count_the_stages_do_not_divide_is_P363():
    plan = planc.loads(PLANS["4 stages, tp inside"])
    with pytest.raises(PlanError) as caught:
        plan.pipeline(layer)(stacked(6), jnp.ones((4, 8, D)))
    assert caught.value.diagnostics[0].code == "P363"


def test_inputs_not_split_into_the_plans_microbatches_are_refused():
    plan = planc.loads(PLANS["2 stages, fsdp inside"])
    with pytest.raises(PlanError) as caught:
        plan.pipeline(layer)(stacked(8), jnp.ones((3, 8, D)))
    assert "microbatches" in caught.value.diagnostics[0].message


def test_a_plan_without_stages_has_no_pipeline():
    with pytest.raises(PlanError):
        planc.loads("mesh(batch = 8)\ndata_parallel\n").pipeline(layer)

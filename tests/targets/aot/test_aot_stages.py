"""`planc aot` of a pipelined training step (`plan.pipeline` inside, Adam around it) on
`cpu:8`: the report has a row per pipeline position, whose analytic bytes (the stages'
parameters and optimizer state per device, as `planc explain` counts them) are the
compile's resident arguments to within 1%."""

import jax
import jax.numpy as jnp
import optax
import pytest

import planc

D, H, L = 256, 1024, 8
PLAN = """mesh(pipe = 2, fsdp = 4)
model_parallel(batch = fsdp)
budget(per_device = 80 GB, state = 3)
stages(pipe, microbatches = 4) {}
layout {
    "w1" -> (pipe, fsdp, _)
    "w2" -> (pipe, _, fsdp)
}
"""


def compiled(text: str):
    plan = planc.loads(text)
    run = plan.pipeline(lambda p, x: x + jnp.tanh(x @ p["w1"]) @ p["w2"])
    opt = optax.adam(1e-3)

    def step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean(run(p, batch) ** 2))(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    params = {"w1": jax.ShapeDtypeStruct((L, D, H), jnp.float32),
              "w2": jax.ShapeDtypeStruct((L, H, D), jnp.float32)}
    opt_state = jax.eval_shape(opt.init, params)
    return plan.aot(step, params, opt_state, jax.ShapeDtypeStruct((4, 8, D), jnp.float32),
                    topology="cpu:8")


@pytest.fixture(scope="module")
def report():
    return compiled(PLAN)


def test_each_position_has_its_stages_and_figures(report):
    rows = report.to_dict()["stages"]
    assert [(r["position"], r["stages"]) for r in rows] == [(0, [0]), (1, [1])]
    assert all(r["peak"] == report.peak for r in rows)


def test_the_analytic_bytes_are_the_compiled_arguments_within_one_percent(report):
    for r in report.stages:
        # 2 MiB of each position's layers, and Adam's two slots of them.
        assert r.analytic_bytes == 3 * 2 * D * H * L * 4 // (2 * 4)
        assert abs(r.analytic_bytes - r.argument_bytes) / r.argument_bytes < 0.01


def test_the_backward_pass_keeps_no_copy_of_the_weights_per_iteration(report):
    # One position's weights: 2 MiB per device. Indexing the stage's one chunk inside the
    # loop made the backward pass keep a copy per iteration: 18 MB of temporaries here.
    per_device = 2 * D * H * L * 4 // 8
    assert report.memory["temp"] < 4 * per_device


def test_interleaved_repeats_keep_no_copy_per_iteration_either():
    # Picking a repeat's chunk by the iteration kept the picked copy of every iteration
    # (15.5 MB here); recomputing the pick in the backward pass keeps 7 MB.
    interleaved = compiled(PLAN.replace("microbatches = 4)", "microbatches = 4, schedule = "
                                        "interleaved(2))"))
    assert interleaved.memory["temp"] < 5 * (2 * D * H * L * 4 // 8)

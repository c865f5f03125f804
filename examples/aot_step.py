"""The training step `planc aot examples/aot.kd --step examples.aot_step:build` compiles.

`build()` returns `(step, params, opt_state, batch)`. The trees hold only shapes and
dtypes (`jax.ShapeDtypeStruct`): nothing is allocated, whatever the model's size.
"""

import jax
import jax.numpy as jnp
import optax

WIDTH, HIDDEN, BATCH = 1024, 4096, 64
optimizer = optax.adam(1e-3)


def loss_fn(params, batch):
    h = jnp.tanh(batch["x"] @ params["dense_0"]["kernel"] + params["dense_0"]["bias"])
    y = h @ params["dense_1"]["kernel"] + params["dense_1"]["bias"]
    return jnp.mean((y - batch["y"]) ** 2)


def step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def build():
    f32 = jnp.float32
    params = {"dense_0": {"kernel": jax.ShapeDtypeStruct((WIDTH, HIDDEN), f32),
                          "bias": jax.ShapeDtypeStruct((HIDDEN,), f32)},
              "dense_1": {"kernel": jax.ShapeDtypeStruct((HIDDEN, WIDTH), f32),
                          "bias": jax.ShapeDtypeStruct((WIDTH,), f32)}}
    batch = {"x": jax.ShapeDtypeStruct((BATCH, WIDTH), f32),
             "y": jax.ShapeDtypeStruct((BATCH, WIDTH), f32)}
    return step, params, jax.eval_shape(optimizer.init, params), batch

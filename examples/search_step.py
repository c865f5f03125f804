"""A small decoder trained with Adam, for `planc suggest --search --step
examples.search_step:build --topology cpu:8`.

`build(remat=False)` returns `(step, params, opt_state, batch)` as `planc aot` takes it;
the search passes `remat=True` to try each layer under `jax.checkpoint`. The trees hold
only shapes (`jax.ShapeDtypeStruct`): nothing is allocated.
"""

import jax
import jax.numpy as jnp
import optax

VOCAB, WIDTH, HEADS, LAYERS = 1024, 256, 4, 4
BATCH, SEQUENCE = 16, 128
optimizer = optax.adam(1e-3)


def layer(p, h):
    b, s, d = h.shape
    q, k, v = (jnp.reshape(h @ p[n], (b, s, HEADS, d // HEADS)) for n in ("wq", "wk", "wv"))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // HEADS)
    causal = jnp.tril(jnp.ones((s, s), bool))
    att = jax.nn.softmax(jnp.where(causal, scores, -1e9), axis=-1)
    h = h + jnp.reshape(jnp.einsum("bhqk,bkhd->bqhd", att, v), (b, s, d)) @ p["wo"]
    return h + jax.nn.gelu(h @ p["up"]) @ p["down"]


def make_loss(remat):
    run = jax.checkpoint(layer) if remat else layer

    def loss(params, batch):
        h = params["embed"][batch["tokens"]]
        for i in range(LAYERS):
            h = run(params[f"layers_{i}"], h)
        logits = h @ params["embed"].T
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()

    return loss


def build(remat=False):
    loss = make_loss(remat)

    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    f32 = jnp.float32
    shapes = {"wq": (WIDTH, WIDTH), "wk": (WIDTH, WIDTH), "wv": (WIDTH, WIDTH),
              "wo": (WIDTH, WIDTH), "up": (WIDTH, 4 * WIDTH), "down": (4 * WIDTH, WIDTH)}
    params = {"embed": jax.ShapeDtypeStruct((VOCAB, WIDTH), f32)}
    for i in range(LAYERS):
        params[f"layers_{i}"] = {n: jax.ShapeDtypeStruct(s, f32) for n, s in shapes.items()}
    batch = {"tokens": jax.ShapeDtypeStruct((BATCH, SEQUENCE), jnp.int32),
             "targets": jax.ShapeDtypeStruct((BATCH, SEQUENCE), jnp.int32)}
    return step, params, jax.eval_shape(optimizer.init, params), batch

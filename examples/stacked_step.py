"""A small decoder with its layers stacked on one array and trained with Adam, for
`planc suggest --search --step examples.stacked_step:build --topology cpu:8`.

`build(remat=False, plan=None)` returns `(step, params, opt_state, batch)` as `planc aot`
takes it. planc passes the plan it compiles under as `plan`: when the plan has `stages`,
the step runs the layers as those stages (`plan.pipeline`) over the plan's microbatches;
otherwise it scans them. The search passes `remat=True` to try each layer under
`jax.checkpoint`. The trees hold only shapes (`jax.ShapeDtypeStruct`): nothing is
allocated.
"""

import jax
import jax.numpy as jnp
import optax

VOCAB, WIDTH, HEADS, LAYERS = 1024, 256, 4, 8
BATCH, SEQUENCE = 32, 128
optimizer = optax.adam(1e-3)


def layer(p, h):
    b, s, d = h.shape
    q, k, v = (jnp.reshape(h @ p[n], (b, s, HEADS, d // HEADS)) for n in ("wq", "wk", "wv"))
    att = jax.nn.dot_product_attention(q, k, v, is_causal=True)
    h = h + jnp.reshape(att, (b, s, d)) @ p["wo"]
    return h + jax.nn.gelu(h @ p["up"]) @ p["down"]


def build(remat=False, plan=None):
    run = jax.checkpoint(layer) if remat else layer

    def layers(stacked, h):
        if plan is not None and plan.microbatches:  # the plan's stages, in turn
            m = plan.microbatches
            xs = jnp.reshape(h, (m, h.shape[0] // m, *h.shape[1:]))
            return jnp.reshape(plan.pipeline(run)(stacked, xs), h.shape)
        return jax.lax.scan(lambda h, p: (run(p, h), None), h, stacked)[0]

    def loss(params, batch):
        h = layers(params["layers"], params["embed"][batch["tokens"]])
        logits = h @ params["embed"].T
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()

    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    f32 = jnp.float32
    shapes = {"wq": (WIDTH, WIDTH), "wk": (WIDTH, WIDTH), "wv": (WIDTH, WIDTH),
              "wo": (WIDTH, WIDTH), "up": (WIDTH, 4 * WIDTH), "down": (4 * WIDTH, WIDTH)}
    params = {"embed": jax.ShapeDtypeStruct((VOCAB, WIDTH), f32),
              "layers": {n: jax.ShapeDtypeStruct((LAYERS, *s), f32) for n, s in shapes.items()}}
    batch = {"tokens": jax.ShapeDtypeStruct((BATCH, SEQUENCE), jnp.int32),
             "targets": jax.ShapeDtypeStruct((BATCH, SEQUENCE), jnp.int32)}
    return step, params, jax.eval_shape(optimizer.init, params), batch

"""A Llama-3-8B-shaped training step for `bench/search.py`'s compile-only sweep:
32 scanned decoder layers (hidden 4,096, 32 query heads and 8 key/value heads of 128,
SwiGLU width 14,336, RMSNorm), a 128,256-token vocabulary with its own head, bfloat16
parameters, optax's Adam, causal attention by `jax.nn.dot_product_attention`, the
activations constrained to the batch axes as MaxText's are.

`build(remat=False)` returns `(step, params, opt_state, batch)` with shapes only
(`jax.ShapeDtypeStruct`): nothing is allocated. `BATCH` sequences of `SEQUENCE` tokens:
4,096 tokens per chip of a `v5e:4x4`, MaxText's per-device batch of 2 at 2,048.
"""

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P

LAYERS, D, HEADS, KV, HEAD_DIM, FFN, VOCAB = 32, 4096, 32, 8, 128, 14336, 128256
BATCH, SEQUENCE = 32, 2048
optimizer = optax.adam(1e-4)


def rms(x, scale):
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 ** 2, -1, keepdims=True) + 1e-5)).astype(
        x.dtype) * scale


def batch_sharded(x):
    """`x` split over the batch axes of the mesh planc compiles under (`data`, `fsdp`),
    as MaxText constrains its activations; XLA otherwise may gather the batch instead."""
    mesh = jax.sharding.get_abstract_mesh()
    axes = tuple(a for a in ("data", "fsdp") if a in mesh.axis_names)
    return jax.lax.with_sharding_constraint(x, P(axes)) if axes else x


def layer(h, p):
    b, s, _ = h.shape
    x = rms(h, p["attn_norm"])
    q = (x @ p["wq"]).reshape(b, s, HEADS, HEAD_DIM)
    k = (x @ p["wk"]).reshape(b, s, KV, HEAD_DIM)
    v = (x @ p["wv"]).reshape(b, s, KV, HEAD_DIM)
    att = jax.nn.dot_product_attention(q, k, v, is_causal=True)
    h = h + att.reshape(b, s, HEADS * HEAD_DIM) @ p["wo"]
    x = rms(h, p["mlp_norm"])
    return batch_sharded(h + (jax.nn.silu(x @ p["gate"]) * (x @ p["up"])) @ p["down"])


def build(remat=False):
    body = jax.checkpoint(layer) if remat else layer

    def loss(params, batch):
        h = batch_sharded(params["embed"][batch["tokens"]])
        h, _ = jax.lax.scan(lambda h, p: (body(h, p), None), h, params["layers"])
        logits = (rms(h, params["final_norm"]) @ params["lm_head"]).astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()

    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    bf16 = jnp.bfloat16

    def stacked(*shape):
        return jax.ShapeDtypeStruct((LAYERS, *shape), bf16)

    params = {
        "embed": jax.ShapeDtypeStruct((VOCAB, D), bf16),
        "layers": {"attn_norm": stacked(D), "wq": stacked(D, HEADS * HEAD_DIM),
                   "wk": stacked(D, KV * HEAD_DIM), "wv": stacked(D, KV * HEAD_DIM),
                   "wo": stacked(HEADS * HEAD_DIM, D), "mlp_norm": stacked(D),
                   "gate": stacked(D, FFN), "up": stacked(D, FFN), "down": stacked(FFN, D)},
        "final_norm": jax.ShapeDtypeStruct((D,), bf16),
        "lm_head": jax.ShapeDtypeStruct((D, VOCAB), bf16),
    }
    batch = {"tokens": jax.ShapeDtypeStruct((BATCH, SEQUENCE), jnp.int32),
             "targets": jax.ShapeDtypeStruct((BATCH, SEQUENCE), jnp.int32)}
    return step, params, jax.eval_shape(optimizer.init, params), batch

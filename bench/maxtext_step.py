"""MaxText's dense decoder as its v5e configs train it, for `bench/maxtext_mfu.py`.

From the `maxtext` 0.2.5 wheel on PyPI (`maxtext/configs/base.yml`,
`configs/tpu/v5e/16b.sh` and `32b.sh`, `configs/types.py::get_individual_scales`):
`global_parameter_scale` doubles heads and MLP width, then the embedding, then the
layers, from a base of 2,048 wide, 16 heads of 128, MLP 7,168, 16 layers, a 32,000-token
vocabulary with its own head; SwiGLU (`mlp_activations: [silu, linear]`), RMSNorm, as
many key/value heads as query heads; float32 weights computed in bfloat16; scanned layers
under full remat (`remat_policy: full`; `nn.remat(prevent_cse=False)` as MaxText does
under scan); AdamW (0.9, 0.95, weight decay 0.1) after clipping at global norm 1.0;
2,048-token sequences; the activations constrained to the batch axes.

One difference, said where it is measured: MaxText's configs run `attention=flash`, a
Pallas kernel, a custom call whose work XLA does not describe (planc counts its bytes and
no FLOPs). This step's attention is XLA's (`jax.nn.dot_product_attention`, causal), whose
FLOPs the HLO shows: the whole T x T, masked.

`build(scale, per_device, devices)` returns `(step, params, opt_state, batch)` with shapes
only (`jax.ShapeDtypeStruct`): nothing is allocated. `sizes=` (a `shape()` dict; a
`kv_heads` entry gives grouped-query attention), `remat=False` and `sequence=` give the
same decoder at other sizes, as `bench/chip_cost.py` runs it on one chip.
"""

import math

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P

BASE = {"emb": 2048, "heads": 16, "mlp": 7168, "layers": 16, "head_dim": 128, "vocab": 32000}
SEQUENCE = 2048

# The plan MaxText's logical rules give with `ici_fsdp_parallelism: -1`: every weight's
# `embed` dimension over fsdp, the rest whole (`mlp`, `heads`, `vocab` map to a tensor axis
# of size 1); the batch over fsdp.
PLAN = """plan maxtext_fsdp
mesh(fsdp = auto)
model_parallel(batch = fsdp)
layout {
    "layers/(attn|mlp)_norm"     -> replicated
    "layers/(wq|wk|wv|gate|up)" -> (_, fsdp, _)
    "layers/(wo|down)"          -> (_, _, fsdp)
    "embed"                     -> (_, fsdp)
    "lm_head"                   -> (fsdp, _)
    "final_norm"                -> replicated
}
"""


def shape(scale: int) -> dict:
    """The model's sizes at `global_parameter_scale` `scale`, as MaxText computes them."""
    base, rem = divmod(int(math.log2(scale)), 3)
    heads = base + int(rem > 0)
    emb = base + int(rem > 1)
    return {"emb": BASE["emb"] * 2 ** emb, "heads": BASE["heads"] * 2 ** heads,
            "mlp": BASE["mlp"] * 2 ** heads, "layers": BASE["layers"] * 2 ** base,
            "head_dim": BASE["head_dim"], "vocab": BASE["vocab"]}


def parameters(s: dict) -> int:
    d, hd, f = s["emb"], s["heads"] * s["head_dim"], s["mlp"]
    kv = s.get("kv_heads", s["heads"]) * s["head_dim"]
    return s["layers"] * (2 * d * hd + 2 * d * kv + 3 * d * f + 2 * d) + 2 * d * s["vocab"] + d


def _rms(x, scale):
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 ** 2, -1, keepdims=True) + 1e-5)
    return normed.astype(jnp.bfloat16) * scale.astype(jnp.bfloat16)


def _batch_sharded(x):
    mesh = jax.sharding.get_abstract_mesh()
    axes = tuple(a for a in ("data", "fsdp") if a in mesh.axis_names)
    return jax.lax.with_sharding_constraint(x, P(axes)) if axes else x


def build(scale: int = 32, per_device: int = 4, devices: int = 256, *, sizes=None,
          remat: bool = True, sequence: int = SEQUENCE):
    s = sizes or shape(scale)
    d, h, hd, f, n, v = (s["emb"], s["heads"], s["head_dim"], s["mlp"], s["layers"],
                         s["vocab"])
    kv = s.get("kv_heads", h)  # grouped-query attention where fewer than the heads
    bf16, f32 = jnp.bfloat16, jnp.float32

    def layer(x_in, p):
        b, t, _ = x_in.shape
        w = {k: a.astype(bf16) for k, a in p.items()}
        x = _rms(x_in, p["attn_norm"])
        q = (x @ w["wq"]).reshape(b, t, h, hd)
        k, vv = ((x @ w[name]).reshape(b, t, kv, hd) for name in ("wk", "wv"))
        att = jax.nn.dot_product_attention(q, k, vv, is_causal=True)
        x_mid = x_in + att.reshape(b, t, h * hd) @ w["wo"]
        x = _rms(x_mid, p["mlp_norm"])
        return _batch_sharded(x_mid + (jax.nn.silu(x @ w["gate"]) * (x @ w["up"])) @ w["down"])

    body = jax.checkpoint(layer, prevent_cse=False) if remat else layer
    optimizer = optax.chain(optax.clip_by_global_norm(1.0),
                            optax.adamw(1e-4, b1=0.9, b2=0.95, weight_decay=0.1))

    def loss(params, batch):
        x = _batch_sharded(params["embed"].astype(bf16)[batch["tokens"]])
        x, _ = jax.lax.scan(lambda c, p: (body(c, p), None), x, params["layers"])
        logits = (_rms(x, params["final_norm"]) @ params["lm_head"].astype(bf16)).astype(f32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()

    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    def stacked(*dims):
        return jax.ShapeDtypeStruct((n, *dims), f32)

    params = {
        "embed": jax.ShapeDtypeStruct((v, d), f32),
        "layers": {"attn_norm": stacked(d), "wq": stacked(d, h * hd), "wk": stacked(d, kv * hd),
                   "wv": stacked(d, kv * hd), "wo": stacked(h * hd, d), "mlp_norm": stacked(d),
                   "gate": stacked(d, f), "up": stacked(d, f), "down": stacked(f, d)},
        "final_norm": jax.ShapeDtypeStruct((d,), f32),
        "lm_head": jax.ShapeDtypeStruct((d, v), f32),
    }
    rows = per_device * devices
    batch = {"tokens": jax.ShapeDtypeStruct((rows, sequence), jnp.int32),
             "targets": jax.ShapeDtypeStruct((rows, sequence), jnp.int32)}
    return step, params, jax.eval_shape(optimizer.init, params), batch


def maxtext_flops(s: dict, per_device: int) -> float:
    """MaxText's training FLOPs per device per step
    (`maxtext_utils.calculate_tflops_training_per_device` for a dense decoder: the
    weights' matmuls x 3, attention counted causal, the head; remat not counted)."""
    bt, t = per_device * SEQUENCE, SEQUENCE
    d, hhd, f = s["emb"], s["heads"] * s["head_dim"], s["mlp"]
    ffn = 2 * bt * f * d * 3
    qkv = 2 * bt * d * 3 * hhd
    proj = 2 * bt * d * hhd
    embedding = 2 * bt * d * s["vocab"]
    causal_attention = 4 * per_device * t * t * hhd / 2
    return (((ffn + qkv + proj) * s["layers"] + embedding) * 3
            + causal_attention * s["layers"] * 3)


def compiled_flops(s: dict, per_device: int, remat: bool = True,
                   sequence: int = SEQUENCE) -> float:
    """The matmul FLOPs XLA should run for this step per device, from the shapes: every
    layer forward (weights and the whole T x T of attention, as XLA computes it masked),
    again under remat but for `down` (the backward needs its input, not its output), and
    twice the forward backward; the head forward and backward."""
    bt, t = per_device * sequence, sequence
    d, hhd, f = s["emb"], s["heads"] * s["head_dim"], s["mlp"]
    kv = s.get("kv_heads", s["heads"]) * s["head_dim"]
    weights = 2 * bt * (2 * d * hhd + 2 * d * kv + 3 * d * f)
    attention = 4 * per_device * t * t * hhd
    forward = weights + attention
    recomputed = forward - 2 * bt * d * f if remat else 0
    head = 2 * bt * d * s["vocab"]
    return s["layers"] * (3 * forward + recomputed) + 3 * head

"""The steps `bench/chip_cost.py` measures on one TPU v5e chip, as `planc cost --step`
builders: a scanned MLP and a decoder with causal attention (`maxtext_step`), at three
widths each, with and without `jax.checkpoint` on the layer, and between them the
regimes a cost model must price: batches from memory-bound to compute-bound, Adam and
plain SGD, float32 and bfloat16 parameters, grouped-query attention and a long sequence.
Every builder returns shapes only; the sizes fit one v5e's 15.75 GiB (the bench checks
each compiled peak).

    planc cost chip.kd --calibrate v5e.json --step chip_steps:mlp_small --step chip_steps:mlp_large

`FIT` names the steps the calibration is fitted on, written before any fit ran; every
other step only checks it. `configure("tiny")` swaps in sizes for a smoke run.
"""

import jax
import jax.numpy as jnp
import optax

import maxtext_step

PLAN = "plan one_chip\nmesh(data = auto)\ndata_parallel\n"


def _decoder(emb, heads, mlp, layers, sequence, per_device, kv_heads=None):
    shape = {"emb": emb, "heads": heads, "kv_heads": kv_heads or heads, "mlp": mlp,
             "layers": layers, "head_dim": 128, "vocab": 32000}
    return shape, sequence, per_device


# name -> (kind, sizes, options). MLP sizes: width, hidden, layers, tokens; decoder sizes:
# maxtext_step's shape dict, the sequence and the batch. Options: `remat`, `optimizer`
# ("adam" or "sgd"), `dtype` (the parameters', "float32" or "bfloat16").
_FULL = {
    # Memory-bound at 256 tokens (the Adam update reads and writes every f32 weight and
    # both moments for a few hundred tokens' FLOPs), near the ridge at 2,048, compute-bound
    # at 8,192; and at half and twice the width.
    "mlp_small": ("mlp", (2048, 8192, 8, 256), {}),
    "mlp_small_remat": ("mlp", (2048, 8192, 8, 256), {"remat": True}),
    "mlp_medium": ("mlp", (2048, 8192, 8, 2048), {}),
    "mlp_large": ("mlp", (2048, 8192, 8, 8192), {}),
    "mlp_large_remat": ("mlp", (2048, 8192, 8, 8192), {"remat": True}),
    "mlp_narrow": ("mlp", (1024, 4096, 16, 4096), {}),
    "mlp_wide": ("mlp", (4096, 16384, 2, 4096), {}),
    "mlp_small_sgd": ("mlp", (2048, 8192, 8, 256), {"optimizer": "sgd"}),
    "mlp_large_sgd": ("mlp", (2048, 8192, 8, 8192), {"optimizer": "sgd"}),
    "mlp_small_bf16": ("mlp", (2048, 8192, 8, 256), {"dtype": "bfloat16"}),
    "mlp_large_bf16": ("mlp", (2048, 8192, 8, 8192), {"dtype": "bfloat16"}),
    "decoder_small": ("decoder", _decoder(1024, 8, 4096, 8, 1024, 8), {}),
    "decoder_small_remat": ("decoder", _decoder(1024, 8, 4096, 8, 1024, 8), {"remat": True}),
    "decoder_medium": ("decoder", _decoder(1536, 12, 6144, 6, 2048, 1), {}),
    "decoder_large": ("decoder", _decoder(2048, 16, 8192, 4, 2048, 1), {}),
    "decoder_large_remat": ("decoder", _decoder(2048, 16, 8192, 4, 2048, 1), {"remat": True}),
    "decoder_gqa": ("decoder", _decoder(2048, 16, 8192, 4, 2048, 1, kv_heads=4), {}),
    "decoder_long_remat": ("decoder", _decoder(1024, 8, 4096, 4, 8192, 1), {"remat": True}),
}
_TINY = {
    name: (kind, (256, 1024, 2, 1024 if "large" in name else 64), options) if kind == "mlp"
    else (kind, _decoder(256, 2, 1024, 2, 512 if "long" in name else 256, 2,
                         kv_heads=1 if "gqa" in name else None), options)
    for name, (kind, _, options) in _FULL.items()
}
NAMES = tuple(_FULL)
# What the calibration is fitted on, named before any fit ran (the first chip run,
# 2026-12-07, measured these four among its eight): the MLP memory-bound at its small
# batch and compute-bound at its large one, and both decoders, more steps than the
# figures fitted (matmul, hbm, op_s). Every other step, and benchmark 19's searched plan,
# only check it.
FIT = ("mlp_small", "mlp_large", "decoder_small", "decoder_large")
_steps = _FULL


def configure(size: str) -> None:
    """Use the `tiny` sizes (a smoke run) or the `full` ones."""
    global _steps
    _steps = _TINY if size == "tiny" else _FULL


def _mlp(width, hidden, layers, tokens, remat=False, optimizer="adam", dtype="float32"):
    optimizer = optax.sgd(1e-4) if optimizer == "sgd" else optax.adam(1e-4)
    bf16 = jnp.bfloat16

    def layer(x, w):
        h = jax.nn.gelu(x @ w["w_in"].astype(bf16))
        return (h @ w["w_out"].astype(bf16)).astype(x.dtype)

    body = jax.checkpoint(layer) if remat else layer

    def loss(params, x):
        y, _ = jax.lax.scan(lambda h, w: (body(h, w), None), x.astype(bf16), params)
        return jnp.mean(y.astype(jnp.float32) ** 2)

    def step(params, opt_state, x):
        value, grads = jax.value_and_grad(loss)(params, x)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    params = {"w_in": jax.ShapeDtypeStruct((layers, width, hidden), dtype),
              "w_out": jax.ShapeDtypeStruct((layers, hidden, width), dtype)}
    x = jax.ShapeDtypeStruct((tokens, width), jnp.float32)
    return step, params, jax.eval_shape(optimizer.init, params), x


def build(name: str):
    """`(step, params, opt_state, batch)` of step `name` (one of `NAMES`)."""
    kind, sizes, options = _steps[name]
    if kind == "mlp":
        return _mlp(*sizes, **options)
    shape, sequence, per_device = sizes
    return maxtext_step.build(per_device=per_device, devices=1, sizes=shape,
                              remat=options.get("remat", False), sequence=sequence)


def analytic_flops(name: str) -> float:
    """The step's matmul FLOPs from its shapes: 6 N T for the weights' matmuls (forward,
    and the backward's two), the attention's T x T as XLA computes it (masked, whole),
    and under remat the forward again but for each layer's last matmul, whose output the
    backward does not need."""
    kind, sizes, options = _steps[name]
    remat = options.get("remat", False)
    if kind == "mlp":
        width, hidden, layers, tokens = sizes
        matmul = 2 * tokens * width * hidden
        return layers * (3 * 2 * matmul + (matmul if remat else 0))
    shape, sequence, per_device = sizes
    return maxtext_step.compiled_flops(shape, per_device, remat=remat, sequence=sequence)


def _builder(name):
    def built():
        return build(name)
    built.__name__ = name
    return built


# `planc cost --step chip_steps:NAME` for each step.
globals().update({name: _builder(name) for name in NAMES})

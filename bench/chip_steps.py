"""The steps `bench/chip_cost.py` measures on one TPU v5e chip, as `planc cost --step`
builders: a scanned MLP and a decoder with causal attention, each with and without
`jax.checkpoint` on its layer, at two sizes. Every builder returns shapes only; the
sizes fit one v5e's 15.75 GiB (the bench checks each compiled peak).

    planc cost chip.kd --calibrate v5e.json --step chip_steps:mlp_small --step chip_steps:mlp_large

The MLP is memory-bound at its small batch (the Adam update reads and writes every f32
weight and both moments for a few hundred tokens' FLOPs) and compute-bound at its large
one: the pair the bench fits on. `configure("tiny")` swaps in sizes for a smoke run.
"""

import jax
import jax.numpy as jnp
import optax

import maxtext_step

PLAN = "plan one_chip\nmesh(data = auto)\ndata_parallel\n"

# name -> (kind, sizes, remat). MLP sizes: width, hidden, layers, tokens; decoder sizes:
# maxtext_step's shape dict plus the sequence and per-device batch.
_FULL = {
    "mlp": {"small": (2048, 8192, 8, 256), "large": (2048, 8192, 8, 8192)},
    "decoder": {
        "small": ({"emb": 1024, "heads": 8, "mlp": 4096, "layers": 8, "head_dim": 128,
                   "vocab": 32000}, 1024, 8),
        "large": ({"emb": 2048, "heads": 16, "mlp": 8192, "layers": 4, "head_dim": 128,
                   "vocab": 32000}, 2048, 1),
    },
}
_TINY = {
    "mlp": {"small": (256, 1024, 2, 64), "large": (256, 1024, 2, 1024)},
    "decoder": {
        "small": ({"emb": 256, "heads": 2, "mlp": 1024, "layers": 2, "head_dim": 128,
                   "vocab": 1024}, 256, 2),
        "large": ({"emb": 512, "heads": 4, "mlp": 2048, "layers": 2, "head_dim": 128,
                   "vocab": 1024}, 512, 2),
    },
}
NAMES = tuple(f"{kind}_{size}{suffix}" for kind in ("mlp", "decoder")
              for size in ("small", "large") for suffix in ("", "_remat"))
# What the calibration is fitted on, named before any fit ran: the four steps without
# remat (the MLP memory-bound at its small batch and compute-bound at its large one, and
# both decoders), more steps than the figures fitted (matmul, hbm, op_s). Every step with
# remat, and benchmark 19's searched plan, only check it.
FIT = ("mlp_small", "mlp_large", "decoder_small", "decoder_large")
_sizes = _FULL


def configure(size: str) -> None:
    """Use the `tiny` sizes (a smoke run) or the `full` ones."""
    global _sizes
    _sizes = _TINY if size == "tiny" else _FULL


def _mlp(width, hidden, layers, tokens, remat):
    optimizer = optax.adam(1e-4)
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

    params = {"w_in": jax.ShapeDtypeStruct((layers, width, hidden), jnp.float32),
              "w_out": jax.ShapeDtypeStruct((layers, hidden, width), jnp.float32)}
    x = jax.ShapeDtypeStruct((tokens, width), jnp.float32)
    return step, params, jax.eval_shape(optimizer.init, params), x


def build(name: str):
    """`(step, params, opt_state, batch)` of step `name` (one of `NAMES`)."""
    kind, size, *rest = name.split("_")
    remat = bool(rest)
    if kind == "mlp":
        return _mlp(*_sizes["mlp"][size], remat)
    sizes, sequence, per_device = _sizes["decoder"][size]
    return maxtext_step.build(per_device=per_device, devices=1, sizes=sizes, remat=remat,
                              sequence=sequence)


def analytic_flops(name: str) -> float:
    """The step's matmul FLOPs from its shapes: 6 N T for the weights' matmuls (forward,
    and the backward's two), the attention's T x T as XLA computes it (masked, whole),
    and under remat the forward again but for each layer's last matmul, whose output the
    backward does not need."""
    kind, size, *rest = name.split("_")
    remat = bool(rest)
    if kind == "mlp":
        width, hidden, layers, tokens = _sizes["mlp"][size]
        matmul = 2 * tokens * width * hidden
        return layers * (3 * 2 * matmul + (matmul if remat else 0))
    sizes, sequence, per_device = _sizes["decoder"][size]
    return maxtext_step.compiled_flops(sizes, per_device, remat=remat, sequence=sequence)


def _builder(name):
    def built():
        return build(name)
    built.__name__ = name
    return built


# `planc cost --step chip_steps:NAME` for each step.
globals().update({name: _builder(name) for name in NAMES})

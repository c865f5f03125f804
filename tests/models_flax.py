"""Small Flax models whose parameters name their dimensions as MaxText's do
(`embed`, `mlp`, `q_heads`, `kv`, `vocab`, `norm`, `layers`), for the tests of logical
axis names: `nnx_decoder()` (Flax NNX, through `nnx.with_partitioning`) and
`linen_variables()` (Flax Linen's `LogicallyPartitioned` boxes, through
`nn.with_logical_partitioning`). Both are built by `planc.sources` under
`jax.eval_shape`, so nothing is allocated.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx

VOCAB, EMBED, MLP, HEADS, KV, LAYERS = 64, 32, 64, 4, 8, 2


def _init(names):
    return nnx.with_partitioning(nnx.initializers.normal(0.02), names)


class Block(nnx.Module):
    def __init__(self, rngs):
        self.query = nnx.Param(_init(("embed", "q_heads", "kv"))(rngs.params(),
                                                                  (EMBED, HEADS, KV)))
        self.out = nnx.Param(_init(("heads", "kv", "embed"))(rngs.params(), (HEADS, KV, EMBED)))
        self.wi = nnx.Linear(EMBED, MLP, use_bias=False, kernel_init=_init(("embed", "mlp")),
                             rngs=rngs)
        self.wo = nnx.Linear(MLP, EMBED, use_bias=False, kernel_init=_init(("mlp", "embed")),
                             rngs=rngs)
        self.norm = nnx.RMSNorm(EMBED, scale_init=nnx.with_partitioning(
            nnx.initializers.ones_init(), ("norm",)), rngs=rngs)


class Decoder(nnx.Module):
    def __init__(self, rngs):
        self.embedding = nnx.Embed(VOCAB, EMBED, embedding_init=_init(("vocab", "embed")),
                                   rngs=rngs)
        self.layers = nnx.List([Block(rngs) for _ in range(LAYERS)]) if hasattr(nnx, "List") \
            else [Block(rngs) for _ in range(LAYERS)]
        self.head = nnx.Linear(EMBED, VOCAB, use_bias=False,
                               kernel_init=_init(("embed", "vocab")), rngs=rngs)


def nnx_decoder():
    return Decoder(nnx.Rngs(0))


class _LinenMlp(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = lambda names: nn.with_logical_partitioning(nn.initializers.lecun_normal(), names)
        x = nn.Dense(MLP, kernel_init=init(("embed", "mlp")), use_bias=False)(x)
        x = nn.Dense(EMBED, kernel_init=init(("mlp", "embed")))(x)
        scale = self.param("scale", nn.with_logical_partitioning(nn.initializers.ones,
                                                                 ("norm",)), (EMBED,))
        return x * scale


def linen_variables():
    return _LinenMlp().init(jax.random.key(0), jnp.ones((2, EMBED)))


def linen_mlp():
    return _LinenMlp()

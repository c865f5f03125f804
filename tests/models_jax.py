"""Small models for planc's JAX tests: pure-JAX parameter trees, their losses, and
shape-only variable lists named as real checkpoints name them.

- `mlp_init` / `mlp_loss`: a two-layer perceptron, `{"dense_0": {"kernel", "bias"}, ...}`.
- `transformer_init` / `transformer_loss`: a decoder-only transformer whose layers are
  stacked into one array per weight (run with `lax.scan`), paths as `plans/jax_stacked.kd`
  expects (`params/layers/attn/wq` of shape (layers, d_model, heads, head_dim)).
- `gemma_variables`, `llama_hf_variables`, `stacked_variables`, `mlp_variables`: the
  same kinds of models as `planc.Variable` lists, scaled down, for resolution tests.

Everything is float32 and deterministic for a given key.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from planc import Variable


# -- MLP ------------------------------------------------------------------------------

def mlp_init(key, sizes=(16, 32, 8)):
    """Parameters of an MLP with layer widths `sizes` (input first)."""
    params = {}
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"dense_{i}"] = {
            "kernel": jax.random.normal(keys[i], (n_in, n_out), jnp.float32) / jnp.sqrt(n_in),
            "bias": jnp.zeros((n_out,), jnp.float32),
        }
    return params


def mlp_apply(params, x):
    n = len(params)
    for i in range(n):
        layer = params[f"dense_{i}"]
        x = x @ layer["kernel"] + layer["bias"]
        if i < n - 1:
            x = jnp.tanh(x)
    return x


def mlp_loss(params, batch):
    """Mean squared error of the MLP on `batch = {"x": (B, in), "y": (B, out)}`."""
    pred = mlp_apply(params, batch["x"])
    return jnp.mean((pred - batch["y"]) ** 2)


def mlp_batch(key, batch=16, sizes=(16, 32, 8)):
    kx, ky = jax.random.split(key)
    return {"x": jax.random.normal(kx, (batch, sizes[0]), jnp.float32),
            "y": jax.random.normal(ky, (batch, sizes[-1]), jnp.float32)}


# -- decoder-only transformer -----------------------------------------------------------

@dataclass(frozen=True)
class Config:
    vocab: int = 32
    d_model: int = 16
    heads: int = 4
    head_dim: int = 4
    ffw: int = 32
    layers: int = 2
    seq: int = 8


def transformer_init(key, cfg: Config = Config()):
    """`{"params": {...}}` with every per-layer weight stacked over a leading layer axis."""
    L, D, H, K, F, V = cfg.layers, cfg.d_model, cfg.heads, cfg.head_dim, cfg.ffw, cfg.vocab
    k = iter(jax.random.split(key, 8))

    def normal(shape, fan_in):
        return jax.random.normal(next(k), shape, jnp.float32) / jnp.sqrt(fan_in)

    return {"params": {
        "embed": normal((V, D), 1.0),
        "layers": {
            "attn_norm": jnp.ones((L, D), jnp.float32),
            "attn": {"wq": normal((L, D, H, K), D), "wk": normal((L, D, H, K), D),
                     "wv": normal((L, D, H, K), D), "wo": normal((L, H, K, D), H * K)},
            "mlp_norm": jnp.ones((L, D), jnp.float32),
            "mlp": {"w_in": normal((L, D, F), D), "w_out": normal((L, F, D), F)},
        },
        "final_norm": jnp.ones((D,), jnp.float32),
        "unembed": normal((D, V), D),
    }}


def _rms_norm(x, scale):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale


def _layer(x, w):
    h = _rms_norm(x, w["attn_norm"])
    a = w["attn"]
    q = jnp.einsum("btd,dhk->bthk", h, a["wq"])
    k = jnp.einsum("btd,dhk->bthk", h, a["wk"])
    v = jnp.einsum("btd,dhk->bthk", h, a["wv"])
    t = x.shape[1]
    scores = jnp.einsum("bqhk,bshk->bhqs", q, k) / jnp.sqrt(q.shape[-1])
    causal = jnp.tril(jnp.ones((t, t), bool))
    scores = jnp.where(causal, scores, -1e9)
    attn = jnp.einsum("bhqs,bshk->bqhk", jax.nn.softmax(scores, axis=-1), v)
    x = x + jnp.einsum("bthk,hkd->btd", attn, a["wo"])
    h = _rms_norm(x, w["mlp_norm"])
    m = w["mlp"]
    x = x + jax.nn.gelu(h @ m["w_in"]) @ m["w_out"]
    return x, None


def transformer_apply(tree, tokens):
    p = tree["params"]
    x = p["embed"][tokens]
    x, _ = jax.lax.scan(_layer, x, p["layers"])
    return _rms_norm(x, p["final_norm"]) @ p["unembed"]


def transformer_loss(tree, batch):
    """Next-token cross entropy on `batch = {"tokens": (B, seq + 1) int32}`."""
    tokens = batch["tokens"]
    logits = transformer_apply(tree, tokens[:, :-1])
    logp = jax.nn.log_softmax(logits, axis=-1)
    target = tokens[:, 1:]
    return -jnp.mean(jnp.take_along_axis(logp, target[..., None], axis=-1))


def transformer_batch(key, batch=8, cfg: Config = Config()):
    return {"tokens": jax.random.randint(key, (batch, cfg.seq + 1), 0, cfg.vocab, jnp.int32)}


# -- shape-only models ----------------------------------------------------------------

def _v(path, shape, dtype="float32"):
    return Variable(path, tuple(shape), dtype)


def gemma_variables(layers=2, vocab=256, hidden=64, heads=8, kv_heads=1, head_dim=16,
                    ffw=128):
    """A keras-hub GemmaBackbone's variables (functional paths), scaled down. With
    `kv_heads=1` the key/value kernels need the plan's fallback alternative."""
    out = [_v("token_embedding/embeddings", (vocab, hidden), "bfloat16")]
    for i in range(layers):
        b = f"decoder_block_{i}"
        out += [
            _v(f"{b}/pre_attention_norm/scale", (hidden,), "bfloat16"),
            _v(f"{b}/attention/query/kernel", (heads, hidden, head_dim), "bfloat16"),
            _v(f"{b}/attention/key/kernel", (kv_heads, hidden, head_dim), "bfloat16"),
            _v(f"{b}/attention/value/kernel", (kv_heads, hidden, head_dim), "bfloat16"),
            _v(f"{b}/attention/attention_output/kernel", (heads, head_dim, hidden), "bfloat16"),
            _v(f"{b}/pre_ffw_norm/scale", (hidden,), "bfloat16"),
            _v(f"{b}/ffw_gating/kernel", (hidden, ffw), "bfloat16"),
            _v(f"{b}/ffw_gating_2/kernel", (hidden, ffw), "bfloat16"),
            _v(f"{b}/ffw_linear/kernel", (ffw, hidden), "bfloat16"),
        ]
    out.append(_v("final_normalization/scale", (hidden,), "bfloat16"))
    return out


def llama_hf_variables(layers=2, vocab=128, hidden=64, kv_hidden=32, inter=96):
    """A Hugging Face Llama checkpoint's tensor names, torch layout (out, in), scaled down."""
    out = [_v("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(layers):
        b = f"model.layers.{i}"
        out += [
            _v(f"{b}.self_attn.q_proj.weight", (hidden, hidden)),
            _v(f"{b}.self_attn.k_proj.weight", (kv_hidden, hidden)),
            _v(f"{b}.self_attn.v_proj.weight", (kv_hidden, hidden)),
            _v(f"{b}.self_attn.o_proj.weight", (hidden, hidden)),
            _v(f"{b}.mlp.gate_proj.weight", (inter, hidden)),
            _v(f"{b}.mlp.up_proj.weight", (inter, hidden)),
            _v(f"{b}.mlp.down_proj.weight", (hidden, inter)),
            _v(f"{b}.input_layernorm.weight", (hidden,)),
            _v(f"{b}.post_attention_layernorm.weight", (hidden,)),
        ]
    out += [_v("model.norm.weight", (hidden,)), _v("lm_head.weight", (vocab, hidden))]
    return out


def tree_variables(tree):
    """The `Variable`s of a pytree of arrays or ShapeDtypeStructs, as planc reads it."""
    from planc.sources import load_variables

    return list(load_variables(tree))


def stacked_variables(cfg: Config = Config(), stacked=True):
    """`transformer_init`'s variables; `stacked=False` drops the layer axis (one layer)."""
    shapes = jax.eval_shape(lambda key: transformer_init(key, cfg), jax.random.key(0))
    out = tree_variables(shapes)
    if stacked:
        return out
    return [Variable(v.path, v.shape[1:], v.dtype) if "/layers/" in v.path else v for v in out]


def mlp_variables(sizes=(16, 32, 8)):
    return tree_variables(jax.eval_shape(lambda key: mlp_init(key, sizes), jax.random.key(0)))

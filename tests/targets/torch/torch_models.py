"""Small torch models for planc's torch tests, shared by the tests and the torchrun worker.

- `module_of(params)`: an `nn.Module` whose `named_parameters()` are exactly `params`
  ({name: shape}; a name's dots are submodules, as Hugging Face names are), each holding
  `values(shape)`;
- `values(shape)`: float64 0, 1, 2, ... in row-major order, so a shard says which slice
  of the whole it is;
- `TinyLlama`: a decoder named as Hugging Face's Llama is (`model.embed_tokens`,
  `model.layers.N.self_attn.q_proj`, ..., `lm_head`), small, float64, every op one
  DTensor shards: `Linear`s, an `Embedding`, RMS norms and attention over the whole
  hidden size (no head reshapes). It runs on plain tensors or DTensors.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def values(shape) -> torch.Tensor:
    return torch.arange(math.prod(shape), dtype=torch.float64).reshape(tuple(shape))


def module_of(params: dict) -> nn.Module:
    root = nn.Module()
    for name, shape in params.items():
        owner = root
        *parents, leaf = name.split(".")
        for part in parents:
            if not hasattr(owner, part):
                owner.add_module(part, nn.Module())
            owner = getattr(owner, part)
        owner.register_parameter(leaf, nn.Parameter(values(shape)))
    return root


class _Norm(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(size, dtype=torch.float64) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def _linear(n_in, n_out):
    return nn.Linear(n_in, n_out, bias=False, dtype=torch.float64)


class _Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.q_proj, self.k_proj = _linear(hidden, hidden), _linear(hidden, hidden)
        self.v_proj, self.o_proj = _linear(hidden, hidden), _linear(hidden, hidden)
        self.scale = hidden ** -0.5

    def forward(self, x):
        scores = self.q_proj(x) @ self.k_proj(x).transpose(-1, -2) * self.scale
        return self.o_proj(torch.softmax(scores, dim=-1) @ self.v_proj(x))


class _Mlp(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj, self.up_proj = _linear(hidden, inter), _linear(hidden, inter)
        self.down_proj = _linear(inter, hidden)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class _Layer(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = _Norm(hidden), _Norm(hidden)
        self.self_attn, self.mlp = _Attention(hidden), _Mlp(hidden, inter)

    def forward(self, h):
        h = h + self.self_attn(self.input_layernorm(h))
        return h + self.mlp(self.post_attention_layernorm(h))


class _Decoder(nn.Module):
    def __init__(self, vocab, hidden, inter, layers):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden, dtype=torch.float64)
        self.layers = nn.ModuleList(_Layer(hidden, inter) for _ in range(layers))
        self.norm = _Norm(hidden)

    def forward(self, ids):
        weight = self.embed_tokens.weight
        if hasattr(weight, "redistribute"):
            # torch 2.13's DTensor cannot run a vocabulary-split lookup end to end: its
            # masked partial sum reduces into no shard, and the gradient's partial sum
            # cannot become one (AssertionErrors in `_redistribute`). Gather the table
            # for the lookup, as a model does that places its own activations.
            from torch.distributed.tensor import Replicate

            weight = weight.redistribute(placements=[Replicate()] * weight.device_mesh.ndim)
        h = nn.functional.embedding(ids, weight)
        for layer in self.layers:
            h = layer(h)
        return self.norm(h)


class TinyLlama(nn.Module):
    def __init__(self, vocab=64, hidden=16, inter=32, layers=2):
        super().__init__()
        self.model = _Decoder(vocab, hidden, inter, layers)
        self.lm_head = _linear(hidden, vocab)

    def forward(self, ids):
        return self.lm_head(self.model(ids))

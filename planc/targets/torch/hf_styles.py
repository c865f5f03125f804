"""Hugging Face tensor-parallel styles: what each does to a parameter, in plan terms.

Hugging Face (PyTorch) stores a Linear weight as `[out_features, in_features]`. Its
`ColwiseParallel` splits the output features: the weight's dimension -2, the bias's -1;
`RowwiseParallel` splits the input features: the weight's dimension -1, the bias stays
whole; `EmbeddingParallel` splits the vocabulary (dimension 0, `embedding_rowwise`) or
the hidden size (dimension 1, `embedding_colwise`). The other styles either keep the
weights whole and only add communication (all-reduce, all-gather, sequence sharding of
activations), which a plan does not carry (a warning, P528), or lay the weights out in a
way a plan cannot express (packed halves, expert parallelism: an error, P526).

`STYLES[name]` is a `Style`; `shard(style, param, rank)` is the Hugging Face answer for
one parameter, and `expected(entries, axis)` the answer of a whole tp plan, found as
Hugging Face finds a parameter's style: `planc import --model` checks an imported plan
with it, and `planc compile --target hf --model` the plan it writes.

>>> shard(STYLES["colwise"], "weight", 2), shard(STYLES["rowwise"], "bias", 1)
((0,), ())
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planc.variables import Variable


@dataclass(frozen=True)
class Style:
    name: str
    kind: str          # "split" | "whole" | "comm" | "inexpressible"
    weight: int | None  # the split dimension of a non-bias parameter (negative: from the end)
    bias: int | None    # the split dimension of a bias
    layout: str         # the rule's layout in the plan, `tp` standing for the axis
    meaning: str

    def layout_for(self, axis: str) -> str:
        return self.layout.replace("tp", axis)


def _colwise(name: str, extra: str = "") -> Style:
    return Style(name, "split", -2, -1, "(..., tp, _) | (tp)",
                 "out features split (weight dim -2, bias)" + extra)


def _rowwise(name: str, extra: str = "") -> Style:
    return Style(name, "split", -1, None, "(..., tp)",
                 "in features split (weight dim -1), bias whole" + extra)


def _whole(name: str, kind: str, meaning: str) -> Style:
    return Style(name, kind, None, None, "replicated", meaning)


def _refused(name: str, meaning: str) -> Style:
    return Style(name, "inexpressible", None, None, "", meaning)


STYLES: dict[str, Style] = {s.name: s for s in (
    _colwise("colwise"),
    _colwise("colwise_rep", ", output gathered"),
    _colwise("colwise_gather_output", ", output gathered"),
    _colwise("local_colwise", ", local tensors"),
    _rowwise("rowwise"),
    _rowwise("rowwise_rep", ", input arrives whole"),
    _rowwise("rowwise_split_input", ", input arrives whole"),
    _rowwise("local_rowwise", ", local tensors"),
    Style("embedding_rowwise", "split", 0, 0, "(tp, ...)",
          "vocabulary split (dim 0)"),
    Style("embedding_colwise", "split", 1, 1, "(_, tp, ...)",
          "hidden size split (dim 1)"),
    _whole("replicate", "whole", "weights whole, computation replicated"),
    _whole("replicated_with_grad_allreduce", "comm",
           "weights whole; their gradients are all-reduced"),
    _whole("sequence_parallel", "comm",
           "weights whole; activations split on the sequence dimension"),
    _whole("gather", "comm", "weights whole; the output is all-reduced / gathered"),
    _whole("all_reduce", "comm", "weights whole; the output is all-reduced"),
    _whole("local", "comm", "weights whole; computation isolated on each device"),
    _whole("isolated", "comm", "weights whole; computation isolated on each device"),
    _refused("packed_colwise", "fused weights (gate_up) split half by half: a strided split"),
    _refused("packed_rowwise", "fused weights split half by half: a strided split"),
    _refused("local_packed_rowwise", "fused weights split half by half: a strided split"),
    _refused("local_packed_colwise", "fused weights split half by half: a strided split"),
    _refused("grouped_gemm", "expert parallelism: each device loads its own experts"),
    _refused("ep_router", "expert parallelism: router scores reshaped at run time"),
    _refused("megamoe_router", "expert parallelism inside a DeepGEMM kernel"),
    _refused("moe_tp_experts", "tensor-parallel experts with run-time gradient syncs"),
    _refused("megamoe_experts", "DeepGEMM Mega MoE experts"),
    _refused("moe_identity_expert", "compensation for identity experts at run time"),
    _refused("mla_kv_a_proj", "a split MLA key/value projection output"),
)}


def shard(style: Style, param: str, rank: int) -> tuple[int, ...] | str:
    """The dimensions Hugging Face splits for `param` (its last name part) of `rank`
    under `style`, or a string saying why Hugging Face itself would fail."""
    dim = style.bias if param == "bias" else style.weight
    if style.kind != "split" or dim is None:
        return ()
    real = dim + rank if dim < 0 else dim
    if not 0 <= real < rank:
        return f"cannot split dimension {dim} of a rank-{rank} parameter ({style.name})"
    return (real,)


def expected(entries: dict[str, str], axis: str):
    """Hugging Face's own answer for a parameter: its style found as
    `_get_parameter_tp_plan` finds it, then the style's split."""

    def layout(var: Variable):
        rank = len(var.shape)
        generic = re.sub(r"\.\d+(\.|$)", lambda m: ".*" + m.group(1), var.path)
        name = entries.get(generic)
        if name is None and "." in generic:
            name = entries.get(generic.rsplit(".", 1)[0])
        if name is None:
            return (None,) * rank
        dims = shard(STYLES[name], var.path.rsplit(".", 1)[-1], rank)
        if isinstance(dims, str):
            return f"cannot: Hugging Face {dims}"
        return tuple(axis if i in dims else None for i in range(rank))

    return layout

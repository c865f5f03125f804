"""What one training step asks of every candidate: the tokens it trains on, the optimizer
state it keeps, and the model's shape as the analytic cost model reads it.

The model's figures come from its variables' roles (`planc.suggest.roles`):

- `matmul_params`: the N of the usual 6·N·T: every weight of rank >= 2 but the embedding
  tables, plus the largest of those once (the head's projection runs as a matmul, a
  lookup does not);
- `layers`: the stacked layers' count, else the distinct numbers of the most repeated
  numbered path;
- `row_parallel`: the matrices tensor parallelism splits on their input side (attention
  output, MLP down projection), over all layers: each costs one all-reduce of the
  activations forward and one backward (Megatron's f/g pair);
- `vocab`: the embedding's vocabulary size (0 without one), for the logits;
- `kept`: `(whole, split)`, the elements per token of one layer its backward pass needs
  kept, unsplit and split over `model` (see `kept_of`); None where the layers have no
  attention or MLP matrices to count them by;
- `constrained`: whether the step constrains its activations' layout
  (`with_sharding_constraint`); where it does not, XLA lays them out after the weights
  (see `score`);
- `scores`: `(elements per token, heads, bytes per element)` of the attention scores
  the step computes unfused, one layer's (`prove.Traced`), `(0, 0, 0)` without.

The tokens per step come from `--tokens`, or from the step's batch: an integer leaf is
token ids (every element a token), a float leaf of rank >= 2 has one token per element of
all dimensions but the last; the largest count is taken. The batch's leading dimension
must divide over the batch axes of a candidate.

>>> from planc.variables import Variable
>>> vs = [Variable("embed", (1000, 64))] + [
...     Variable(f"layers_{i}/{n}", s) for i in range(4)
...     for n, s in (("attn/query", (64, 64)), ("attn/out", (64, 64)), ("mlp/up", (64, 256)),
...                  ("mlp/down", (256, 64)))]
>>> w = workload_of(vs, tokens=4096, state=3)
>>> w.layers, w.row_parallel, w.vocab, w.hidden
(4, 8, 1000, 64)
>>> w.matmul_params == 4 * (64 * 64 * 2 + 64 * 256 * 2) + 1000 * 64
True
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from planc.suggest.roles import detect_roles, model_facts
from planc.suggest.search.pipeline import layers_of, numbers_by_prefix
from planc.suggest.search.target import NUMBERED, STACKED, UNKNOWN, Target
from planc.variables import itemsize

__all__ = ["Workload", "workload_of", "tokens_of_batch"]

@dataclass(frozen=True)
class Workload:
    """One step's demands (see the module docstring). `batch` is the batch's leading
    dimension when a step gives it (None with `--tokens`)."""

    tokens: int
    batch: int | None
    state: int
    act_bytes: int
    hidden: int
    layers: int
    matmul_params: int
    row_parallel: int
    vocab: int
    param_bytes: int
    head_params: int = 0  # the head's elements (the largest embedding), in `matmul_params`
    embedding_bytes: int = 0  # every embedding's and head's bytes
    remat_option: bool = False  # the step builder takes `remat=`
    numbered: object = None  # the model's numbered layers (`pipeline.Layers`), if any
    pipeline_option: bool = False  # weigh pipeline stages (no step: see `pipeline`)
    stacked: bool = False  # the layers are stacked on one array (a scanned model)
    plan_option: bool = False  # the step builder takes `plan=` (so it can pipeline)
    kept: tuple | None = None  # (whole, split) elements per token a layer keeps (`kept_of`)
    target: Target = UNKNOWN  # what the framework that runs the plan runs (`target`)
    pipeline_only: bool = False  # a pipeline was asked for (`--pipeline`): only those
    # the step constrains its activations' layout (`prove.constrains_layouts`); without a
    # step, assumed, as MaxText's and Keras's steps do
    constrained: bool = True
    # (elements per token, heads, bytes per element) of the attention scores the step
    # computes unfused, one layer's (`prove.Traced`)
    scores: tuple = (0, 0, 0)

    @property
    def stacked_pipelines(self) -> bool:
        """Whether stacked layers may be cut into stages: without a step, or with a
        builder that takes the plan (and so runs `plan.pipeline`)."""
        return (self.stacked and (self.pipeline_option or self.plan_option)
                and STACKED in self.target.pipelines)

    @property
    def numbered_pipelines(self) -> bool:
        """Whether numbered layers may be cut into stages: without a step, for a target
        that runs stage rules."""
        return (self.pipeline_option and self.numbered is not None
                and NUMBERED in self.target.pipelines)


def workload_of(variables, *, tokens: int, state: int, batch: int | None = None,
                roles=None, remat_option: bool = False,
                pipeline_option: bool = False, plan_option: bool = False,
                target: Target = UNKNOWN, pipeline_only: bool = False,
                constrained: bool = True, scores: tuple = (0, 0, 0)) -> Workload:
    """The `Workload` of training `variables` on `tokens` tokens per step."""
    variables = tuple(variables)
    roles = roles if roles is not None else detect_roles(variables)
    facts = model_facts(variables)
    matmul = rows = 0
    embeddings = []
    dtypes: Counter = Counter()
    kept: Counter = Counter()  # the sizes of the matrices whose outputs, inputs are kept
    kinds = set()
    for v, r in zip(variables, roles):
        dtypes[v.dtype] += v.size
        if v.rank < 2:
            continue
        if r.kind == "embedding":
            embeddings.append(v)
            continue
        matmul += v.size
        kept[_kept_kind(r)] += v.size
        kinds.add(r.kind)
        if r.kind == "attention_out" or (r.kind == "mlp" and "down" in r.label):
            rows += v.shape[0] if r.dim_names[:1] == ("layers",) else 1
    vocab = head_params = 0
    if embeddings:
        head = max(embeddings, key=lambda v: (v.size, v.path))
        matmul += head.size
        head_params = head.size
        vocab = max(d for d in head.shape if d != facts.hidden) if len(set(head.shape)) > 1 \
            else head.shape[0]
    main = max(dtypes.items(), key=lambda t: (t[1], t[0]))[0] if dtypes else "float32"
    layers = _layers(variables, facts)
    return Workload(tokens=tokens, batch=batch, state=state,
                    act_bytes=max(1, int(itemsize(main))), hidden=facts.hidden,
                    layers=layers, matmul_params=matmul,
                    kept=kept_of(kept, kinds, facts.hidden, layers),
                    row_parallel=rows, vocab=vocab, head_params=head_params,
                    embedding_bytes=sum(v.nbytes for v in embeddings),
                    param_bytes=sum(v.nbytes for v in variables), remat_option=remat_option,
                    numbered=None if facts.stacked else layers_of(variables),
                    pipeline_option=pipeline_option, stacked=bool(facts.stacked),
                    plan_option=plan_option, target=target, pipeline_only=pipeline_only,
                    constrained=constrained, scores=scores)


def _kept_kind(role) -> str | None:
    """Which activations of a layer a matrix's role says are kept for the backward: the
    output of query/key/value and of MLP up/gate projections (the input of attention
    and of the nonlinearity), the input of the attention output; a down projection's
    input is the nonlinearity's output, which XLA recomputes in its fusion."""
    if role.kind == "attention" or (role.kind == "mlp" and "down" not in role.label):
        return "out"
    if role.kind == "attention_out":
        return "in"
    return None


def kept_of(sizes, kinds, hidden: int, layers: int) -> tuple | None:
    """`(whole, split)`: the elements per token one layer keeps for its backward pass, as
    XLA keeps them (compile-only `v5e:2x4`, `bench/search.py`): the inputs of its
    matrices and of its nonlinearities, each once, with the elementwise work between them
    recomputed in its fusion. Unsplit over `model`: the input of the attention block and
    of the MLP (`hidden` each, where the layer has one); split (column-parallel): the
    outputs of query, key, value and up/gate projections, and the input of the attention
    output. `sizes` holds the sizes of the matrices of each (`_kept_kind`), `kinds` the
    layers' roles. Korthikanti et al.'s table 2, which `score` used before, counts
    5 + 12 / t elements of `hidden` for a GPT layer with dropout, two layer norms and no
    fusion: 1.2-1.45x what XLA kept of the small decoder of `bench/search.py`."""
    if not sizes.get("out") or not hidden or not layers:
        return None
    split = (sizes["out"] + sizes.get("in", 0)) / (hidden * layers)
    return hidden * (("attention" in kinds) + ("mlp" in kinds)), split


def _layers(variables, facts) -> int:
    if facts.stacked:
        return max(facts.stacked.values())
    return max(map(len, numbers_by_prefix(variables).values()), default=1)


def tokens_of_batch(leaves) -> tuple[int, int] | None:
    """`(tokens, batch)` of a step's batch leaves (objects with `shape` and `dtype`), or
    None when it has no leaf of rank >= 1 (see the module docstring)."""
    best = None
    for leaf in leaves:
        shape = tuple(int(d) for d in leaf.shape)
        if not shape:
            continue
        kind = getattr(getattr(leaf, "dtype", None), "kind", "f")
        n = 1
        for d in (shape if kind in "iub" or len(shape) == 1 else shape[:-1]):
            n *= d
        if best is None or n > best[0]:
            best = (n, shape[0])
    return best

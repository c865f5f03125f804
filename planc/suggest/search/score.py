"""The analytic cost of one candidate: its peak bytes per device and its step time, from
shapes alone, priced with the same chip table, terms and bounds as `planc cost`
(`planc.targets.cost.model`), so the two speak in one unit. Thousands a second.

Per device, with `d`, `f`, `t` devices on `data`, `fsdp`, `model`, T tokens per step and
`T_loc = T / (d f)` on each batch shard:

The time is `planc cost`'s per-op model, in aggregate: the ops on the core add up.

- **Matmuls**: (6 + 2 with remat) N T / (d f t) FLOPs at the chip's matrix peak (a head
  whole over `model`, `+ whole vocab`, counted whole on each device of it), or the
  weights they read once per pass (3 passes, 4 with remat) at their `model` shard,
  whichever takes longer.
- **HBM**: the update reading and writing parameters, gradients and slots, and the
  stored activations written once and read once: memory-bound ops, after the matmuls.
- **Op launches**: 32 ops per layer and pass, and 100 outside the layers, at the
  calibration's `op_s`.
- **Collectives**, bytes each device sends by ring algorithm (`moved_bytes`):
  FSDP all-gathers of the weights split over `fsdp` (forward and backward, a third with
  remat) and one reduce-scatter of their gradients; an all-reduce over `data` of the
  gradients it replicates (ZeRO-1's reduce-scatter and all-gather move the same);
  tensor parallelism's all-reduces of the activations (`T_loc x hidden`), two per
  row-parallel matrix (three with remat). Each over the links the axis holds on the
  topology (`planc.targets.cost.links`), a line of one link without one.
- **Slots on the host** (`+ slots on host`): counted apart (`host`) and out of the
  forward and backward passes' peak; but JAX computes on device memory, so the update
  brings them back: the peak is the larger of the passes' (the parts) and the update's
  (parameters, gradients and slots), and the update's HBM traffic is as before. The time
  to move them over the host link, and the update XLA:TPU runs on the host, are not
  priced (planc has no sourced figures for either: `planc cost`'s P821), so such a
  candidate's time is its device twin's, a lower bound. XLA's schedule moves the real peak either way (on compile-only `v5e:2x4`
  a small step's rose from 15.1 to 19.7 MiB with its slots on the host, a step of larger
  activations' fell from 819 to 443 MiB): the compile decides.
- **Peak bytes**: parameters, gradients and optimizer slots at their layouts, the
  activations kept for the backward pass, per layer `T_loc * (whole + split / t)`
  elements, as XLA keeps them (`workload.kept_of`: the inputs of the layer's matrices
  and nonlinearities, each once; without attention or MLP matrices to count, `T_loc *
  hidden * (10 + 24 / t)` bytes at 16 bits, Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models", 2022, table 2, without the attention
  scores a fused attention never stores), only each layer's input with remat plus one
  layer recomputed, the logits and their gradient in f32, an unfused attention's scores
  (`Workload.scores`: its softmax's output, and a bfloat16 copy of it for the values'
  gradient when wider, as XLA:TPU multiplies at JAX's default precision), and under
  FSDP one layer's weights gathered; or the update's, when larger: parameters,
  gradients, the slots and their new values.
- **A step that constrains no activation** (`Workload.constrained`, read from the step:
  no `with_sharding_constraint`): XLA's sharding propagation lays the activations out
  after the weights, which FSDP splits on `hidden`. Each device computes on the whole
  batch of its `fsdp` group (`T / d` tokens), the hidden-wide activations split over
  `fsdp` and the matrices' outputs whole over it, their partial sums all-reduced; no
  weight is gathered and no gradient is whole. `examples/search_step.py`'s `fsdp=8`
  peak is 5x its twin's whose activations are constrained to the batch axes on
  compile-only `v5e:2x4`, 2x on `cpu:8` (`bench/search.py`;
  `tests/suggest/search/test_search_peak_compiled.py`). The time terms still price
  FSDP's all-gathers.

With pipeline stages (`pipeline`): the most loaded stage's parameters, 1F1B's S
microbatches of its L / S layers in flight on the first stage, compute stretched by the
bubble, and each microbatch's activations (and their gradients) sent to the next stage.
Stacked layers run by `plan.pipeline` are JAX's loop, which keeps the activations of all
its M + S - 1 iterations and the stacked gradients twice (summed over the iterations,
and one iteration's), and sums the outputs over the stages (an all-reduce, in float32).
Each iteration runs its stage's layers afresh: their weights are read, and under FSDP
gathered and their gradients reduced, once per iteration, not once per step (what
MaxText's `pipeline_fsdp_ag_once` avoids, and `plan.pipeline` does not).

What this leaves out (attention's own FLOPs, fusion, XLA's scheduling) is why the best
candidates are compiled: the analytic figures rank, the compile decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from planc.suggest.layouts import FSDP, MODEL, shard_bytes
from planc.resolve.stages import bubble
from planc.suggest.search.pipeline import SPREAD
from planc.suggest.zero import entry_axes
from planc.targets.cost.model import (Term, bounds, collective_term, hbm_term, launch_term,
                                      moved_bytes)

__all__ = ["Score", "score", "LINE"]

# The ops XLA:TPU runs per layer and pass (a decoder layer's fusions, matmuls and
# copies: 30-40 on a v5e, from benchmark 17's programs), and outside the layers (the
# embedding, the head, the loss, the update's fusions).
_OPS_PER_LAYER_PASS = 32
_OPS_OUTSIDE = 100


class _Line:
    """An axis with no topology to lie on: one link."""

    kind, links = "line", 1


LINE = _Line()


@dataclass(frozen=True)
class Score:
    """A candidate's analytic `peak` (bytes per device), its parts, its time terms,
    `(lower_s, upper_s, estimate_s)`, and the bytes per device of its slots on the host
    (`host`, 0 unless `+ slots on host`; their time is not in the terms)."""

    peak: int
    parts: dict
    terms: tuple
    lower_s: float
    upper_s: float
    estimate_s: float
    flops: float
    host: int = 0

    def largest(self) -> Term:
        return max(self.terms, key=lambda t: (t.seconds, t.name))

    def largest_part(self) -> tuple[str, int]:
        """(name, bytes) of the part of the peak that holds the most (`logits`...)."""
        parts = peak_parts(self.parts, self.host)
        name = max(parts, key=lambda k: (parts[k], k))
        return name, parts[name]


def peak_parts(parts: dict, host: int) -> dict:
    """The parts whose sum is the peak: the passes' (`parts`), or the update's when it is
    larger: the parameters, their gradients and the slots, with `host` bytes of slots on
    the host those brought back to device memory, else those in device memory and their
    new values beside them (XLA writes the new slots before it frees the old: on
    compile-only `v5e:2x4` a data-parallel step's peak is the update's, 0.95-1.05x
    this)."""
    if host:
        update = {"parameters": parts["parameters"], "gradients": parts["gradients"],
                  "optimizer": host}
    else:
        update = {"parameters": parts["parameters"], "gradients": parts["gradients"],
                  "optimizer": parts["optimizer"], "new optimizer state": parts["optimizer"]}
    if sum(update.values()) > sum(parts.values()):
        return update
    return parts


def _matmuls(peak_seconds: float, weight_bytes: float, chip, calibration) -> Term:
    """The matmuls as the per-op model times them: each the larger of its FLOPs and the
    weights it reads, at their calibrated rates (`planc.targets.cost.model`)."""
    e = calibration.efficiency
    memory = weight_bytes / chip.hbm_bytes_per_s
    return Term("matmul compute", "compute", max(peak_seconds / e["matmul"], memory / e["hbm"]),
                max(peak_seconds, memory),
                serial_seconds=peak_seconds / e["matmul"] + memory / e["hbm"])


def loads(variables, choice, pipe=None) -> tuple[int, int, int]:
    """(bytes per device, of them split over `fsdp`, of them whole over it) of the most
    loaded stage of `pipe` under `choice`'s layouts (with a stack over the stages, as
    `pipe.layouts` writes it, and the other variables on every stage beside it); one
    stage without `pipe`."""
    stages = pipe.count if pipe is not None else 1
    layouts = pipe.layouts(choice.layouts) if pipe is not None else choice.layouts
    totals = [[0, 0, 0] for _ in range(stages)]
    for i, (v, lay) in enumerate(zip(variables, layouts)):
        b = shard_bytes(v.shape, v.dtype, lay, choice.fsdp, choice.tp, stages)
        where = pipe.stage_of[i] if pipe is not None else 0
        kind = 1 if any(FSDP in entry_axes(e) for e in lay) else 2
        # A stack is on each stage; so, with stacked layers (`plan.pipeline`), is every
        # other variable: `plan.shardings` lays the embedding placed `first` out over the
        # whole mesh. Numbered layers run where each stage holds its own modules.
        everywhere = where == SPREAD or (pipe is not None and pipe.stacked)
        for row in (totals if everywhere else (totals[where],)):
            row[0] += b
            row[kind] += b
    return tuple(max(totals, key=lambda t: (t[0], t[1])))


def score(candidate, variables, workload, chip, calibration, placements=None) -> Score:
    """The analytic `Score` of `candidate` (see the module docstring); `placements` maps
    a mesh axis to its `AxisPlacement` on the topology (a line of one link if absent)."""
    c = candidate.choice
    w = workload
    d, f, t = c.data, c.fsdp, c.tp
    pipe = candidate.pipeline
    s, m = (pipe.count, pipe.microbatches) if pipe is not None else (1, 1)
    placements = placements or {}
    remat = candidate.remat
    t_loc = w.tokens / (d * f)
    act = w.act_bytes
    # the most loaded stage's share, on one stage's devices
    params, split, whole = loads(variables, c, pipe)
    slot = c.slot_bytes if c.slot_bytes is not None else params
    slots = (w.state - 1) * slot
    host = slots if c.host_slots else 0
    # 1F1B keeps S microbatches of its L / S layers in flight on the first stage: the
    # same layers-times-tokens as L layers of one microbatch
    here, tokens = w.layers / s, t_loc / m
    looped = pipe is not None and pipe.stacked
    in_flight = (m + s - 1) if looped else s if pipe is not None else 1
    # A step that constrains no activation leaves their layout to XLA's propagation,
    # which follows the weights FSDP splits on `hidden`: each device then computes on
    # the whole batch of its `fsdp` group, the hidden-wide activations split over `fsdp`
    # and the matrices' outputs whole over it, the partial sums all-reduced where the
    # weights are (no weight is gathered, no gradient whole).
    loose = f > 1 and pipe is None and not w.constrained
    narrow = f if loose else 1  # what `fsdp` splits of the hidden-wide activations
    if loose:
        tokens = w.tokens / d
    if w.kept is not None:
        layer = tokens * (w.kept[0] / narrow + w.kept[1] / t) * act
    else:  # no attention or MLP matrices to count by: a GPT layer's, unfused
        layer = tokens * w.hidden * (10 / narrow + 24 / t) * act / 2
    # An unfused attention keeps its softmax's output (heads x S a token, its heads split
    # over `model` as far as they divide) for the softmax's backward, and, wider than 16
    # bits, a bfloat16 copy for the values' gradient: XLA:TPU multiplies in bfloat16 at
    # JAX's default precision.
    elements, heads, size = w.scores
    if elements:
        layer += tokens * elements * (size + (2 if size > 2 else 0)) / gcd(heads, t)
    stored = in_flight * ((here * tokens * w.hidden / narrow * act + layer) if remat
                          else here * layer)
    # A vocabulary-parallel head keeps its slice of the logits; a whole one, all of them.
    split_vocab = t > 1 and w.vocab % t == 0 and not c.whole_vocab
    vocab = w.vocab / t if split_vocab else w.vocab
    logits = 2 * tokens * vocab * 4
    # Under FSDP, XLA:TPU gathers a layer's weights as the layer runs and reduce-scatters
    # its gradients as they are made: one layer's whole at a time, or one stage's per
    # iteration (`plan.pipeline`). (Counting every layer's gathered and the gradients
    # whole put a decoder whose activations are constrained to the batch at 2.2x its
    # compiled peak on compile-only `v5e:2x4`; XLA:CPU keeps them, and peaks higher.)
    gathered = (split * f / max(here, 1)) if f > 1 and not loose else 0
    grads = 2 * params if looped else params
    parts = {"parameters": params, "gradients": grads,
             "optimizer": slots - host,
             "activations": int(stored), "logits": int(logits), "gathered": int(gathered)}
    peak = sum(peak_parts(parts, host).values())

    passes = 4 if remat else 3
    # A head whole over `model` is computed whole on each of its devices.
    matmuls = w.matmul_params + (w.head_params * (t - 1) if c.whole_vocab else 0)
    flops = (passes * 2) * matmuls * w.tokens / (d * f * t * s)
    dtype = "bf16" if act <= 2 else "f32"
    # a pipeline's stages idle through its bubble, as `planc explain` states it
    idle = bubble(s, m) if pipe is not None else 0.0
    read = w.param_bytes + (w.embedding_bytes * (t - 1) if c.whole_vocab else 0)
    iterations = (m + s - 1) if looped else 1  # how often the loop runs a stage's layers
    weights = passes * read * iterations / (t * s)  # what the matmuls read
    rest = (3 + 2 * (w.state - 1)) * params + 2 * stored + logits
    hbm = weights + rest
    out = [_matmuls(flops / chip.peak_flops(dtype) / (1 - idle), weights, chip, calibration),
           hbm_term(rest, chip, calibration),
           launch_term(_OPS_PER_LAYER_PASS * here * passes * iterations + _OPS_OUTSIDE,
                       calibration)]

    def talk(kind, axis, sent, count=1):
        if sent > 0:
            out.append(collective_term(f"{kind} over {axis}", sent * count,
                                       [placements.get(axis, LINE)], chip, calibration))

    if f > 1:
        talk("all-gather", FSDP, moved_bytes("all-gather", split * f, f),
             (passes - 1) * iterations)
        talk("reduce-scatter", FSDP, moved_bytes("reduce-scatter", split, f), iterations)
        talk("all-reduce", FSDP, moved_bytes("all-reduce", whole, f))
    if d > 1:
        talk("all-reduce", "data", moved_bytes("all-reduce", params, d))
    if t > 1:
        activation = int(t_loc * w.hidden * act)
        talk("all-reduce", MODEL, moved_bytes("all-reduce", activation, t),
             w.row_parallel / s * (passes - 1))
    if pipe is not None:  # each microbatch's activations forward, their gradients back
        talk("collective-permute", pipe.axis, 2 * int(t_loc * w.hidden * act))
    if looped:  # the loop's outputs summed over the stages, forward and backward
        talk("all-reduce", pipe.axis, moved_bytes("all-reduce", int(t_loc * w.hidden * 4), s), 2)
    lower, upper, estimate = bounds(out, calibration)
    return Score(int(peak), parts, tuple(out), lower, upper, estimate, flops, int(host))

"""What `plan.pipeline`'s loop holds on a device at its peak, from shapes: the figure
`planc aot` sets beside the compiled peak of a pipelined step.

JAX differentiates the loop, so the backward pass keeps what the forward computed for it,
whatever the plan's schedule: every iteration's activations are kept, as GPipe keeps
them (a schedule's order is what a torch or Megatron runtime holds, which `planc explain`
counts in microbatches). For one position, by term:

- `arguments`: the step's arguments per device as they are placed (the parameters, the
  optimizer state the step is given, the batch), from their shardings (the new parameters
  and state take the same room whether or not they are written over the old: XLA computes
  them into temporaries when they are, so `--no-donate` changes nothing here);
- `gradients`: the stacked layers' twice (summed over the iterations, and one iteration's,
  stacked by the scan over the stage's layers), the other variables' once;
- `layer`: one layer's weights as a device computes with them (gathered over the batch
  axes: FSDP), and their gradient;
- `picked`: with V stages a position (`interleaved(V)`, `looped_bfs(V)`), a repeat's
  weights picked from the position's, in the forward pass and again in the backward that
  recomputes it;
- `activations`: with one repeat, M + P iterations of the stage's layers, each keeping
  what JAX's backward keeps of a layer (`PipelineLoop.residuals`: M + P - 1 iterations,
  the bubble's included, and one more as the scan over the layers stacks it); with V
  repeats, each of the V M + P - 1 iterations keeps only its input (the stage is
  recomputed), and one stage's layers are live as it is;
- `buffers`: the loop's two buffers of the microbatches (the last position's outputs, for
  the next repeat and for the result).

On the steps `tests/targets/aot/test_aot_stages.py` compiles (2 and 4 stages; FSDP, TP and
both inside; `interleaved(2)`; a tanh MLP and a SwiGLU layer) the sum is XLA's peak within
the percentage `docs/aot.md` records.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PipelineLoop:
    """One traced `plan.pipeline` run: its `microbatches`, the `layers` stacked, and per
    device the bytes of a microbatch's share (`boundary`), of one layer's weights as a
    device computes with them (`layer`), and of what JAX's backward pass keeps of one
    layer's forward (`residuals`; None where the layer could not be traced for it)."""

    microbatches: int
    layers: int
    boundary: int
    layer: int
    residuals: int | None

    def per_stage(self, count: int) -> int:
        """The layers of each of `count` stages."""
        return self.layers // count


@dataclass(frozen=True)
class LoopMemory:
    """What `plan.pipeline`'s loop holds on a device of one position at its peak, in bytes
    by term (see the module docstring)."""

    arguments: int
    gradients: int
    layer: int
    picked: int
    activations: int
    buffers: int

    @property
    def peak(self) -> int:
        return (self.arguments + self.gradients + self.layer + self.picked
                + self.activations + self.buffers)

    def to_dict(self) -> dict:
        return {"arguments": self.arguments, "gradients": self.gradients,
                "layer": self.layer, "picked": self.picked, "activations": self.activations,
                "buffers": self.buffers, "peak": self.peak}


def loop_memory(report, position: int, loop: PipelineLoop,
                arguments: int) -> LoopMemory | None:
    """`LoopMemory` of `position` for a validation `report` of a plan with stages (no
    errors), the traced `loop`, and the bytes per device of the step's arguments as
    placed; None while a variable's bytes per device, or the layer's residuals, are
    unknown. The loop holds the same on every position: each position's share of the
    stacked layers, and every variable a stage rule places by its path."""
    ir, staged = report.ir, report.stages
    per_device = report.bytes_per_device
    if loop.residuals is None or staged.placed_param_bytes is None:
        return None
    virtual, positions, m = ir.stages.virtual, staged.positions, loop.microbatches
    stacked = sum(per_device[i] for i in staged.stacked)
    # Placed by stage rules, not stacked: `plan.shardings` puts each on every position.
    own = staged.placed_param_bytes - stacked
    per_stage = loop.per_stage(positions * virtual)
    if virtual == 1:
        activations = (m + positions) * per_stage * loop.residuals
    else:
        activations = ((virtual * m + positions - 1) * loop.boundary
                       + per_stage * loop.residuals)
    return LoopMemory(arguments=arguments, gradients=2 * stacked + own, layer=2 * loop.layer,
                      picked=2 * stacked // virtual if virtual > 1 else 0,
                      activations=activations, buffers=2 * m * loop.boundary)


def schedule_activations(report, position: int, loop: PipelineLoop) -> int | None:
    """The activations a runtime that runs the plan's schedule step by step (torch's
    `pipelining`, Megatron) keeps on a device of `position` at its peak: the microbatches
    in flight there (`planc explain`'s count: all M under GPipe, P - s on stage s under
    1F1B; for `interleaved(V)`, chunks of one stage) times what one keeps through a
    stage's layers; None where the layer's residuals are unknown."""
    if loop.residuals is None:
        return None
    staged = report.stages
    row = next(r for r in staged.rows if r.position == position)
    return row.in_flight * loop.per_stage(len(staged.rows)) * loop.residuals

"""Pipeline stages run in JAX: `plan.pipeline(layer_fn)` returns `run(stacked, inputs)`.

`layer_fn(layer_params, x) -> x` is one layer; `stacked` holds every layer's parameters
stacked on a leading dimension of L layers (as `jax.lax.scan` takes them); `inputs` has a
leading dimension of the plan's `microbatches`. `run` gives what scanning `layer_fn` over
the L layers gives each microbatch, and so do its gradients, but the layers run as the
plan's stages over its pipeline axis:

- stage k holds layers k x L/S .. (k + 1) x L/S - 1 of the S = size(axis) x V stages, and
  runs on position k % size(axis) (V = 1 but for `interleaved(V)`, MaxText's repeats);
- the loop is `jax.shard_map` over the pipeline axis alone (the other axes stay
  automatic, so the layouts inside a stage, FSDP or tensor parallel, are XLA's to keep),
  `lax.ppermute` hands each microbatch's activations to the next position, and the last
  position's go back to the first for the next repeat;
- iteration t runs, on position p, work item t - p: microbatch (t - p) % M of repeat
  (t - p) // M, for V M + P - 1 iterations in all: P - 1 of them the bubble.

JAX differentiates through the loop, so the backward pass is the forward's mirror (a
repeat's chunk, picked by the iteration, is picked again there rather than kept per
iteration); the
order a schedule gives the backward passes (1F1B against GPipe) is memory and time, which
`planc explain` and `planc cost` report, not arithmetic: every schedule computes this.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec

from planc.diagnostics import PlanError, error
from planc.ir import PlanIR
from planc.targets.jax import sharding as target
from planc.targets.jax.compat import require

__all__ = ["pipeline"]


def pipeline(ir: PlanIR, layer_fn, mesh=None):
    """`run(stacked, inputs)`: see the module docstring."""
    stages = ir.stages
    if stages is None:
        raise PlanError((error("P161", "`plan.pipeline` runs the plan's stages, and this plan "
                               "has no `stages`", ir.anchor,
                               help="add `stages(AXIS, microbatches = N) { ... }`"),),
                        ir.source_dict)
    mesh, bound = target._mesh(ir, mesh)
    shard_map = require("shard_map", bound, needed_for="`plan.pipeline`")
    axis = stages.axis
    positions = bound.mesh.size_of(axis)
    repeats, micro = stages.virtual, stages.microbatches

    def run(stacked, inputs):
        leaves = jax.tree_util.tree_leaves(stacked)
        layers = {int(a.shape[0]) for a in leaves} if leaves else {0}
        count = positions * repeats
        if len(layers) != 1 or min(layers) % count or min(layers) == 0:
            raise PlanError((error(
                "P363", f"the stacked parameters have {sorted(layers)} layers, which do not "
                f"split into {count} stages of equal length", stages.span,
                label="these stages", help=f"stack a multiple of {count} layers on the "
                "leading dimension of every parameter"),), bound.source_dict)
        if getattr(inputs, "shape", (None,))[0] != micro:
            raise PlanError((error(
                "P161", f"the inputs have {getattr(inputs, 'shape', ['?'])[0]} microbatches "
                f"on their leading dimension, and the plan says {micro}", stages.span,
                label="microbatches here", help="split the batch into the plan's "
                "microbatches: `x.reshape(microbatches, -1, *x.shape[1:])`"),),
                bound.source_dict)
        per = min(layers) // count
        # Layer l = k x per + j of stage k = r x P + p: indexed [r, p, j].
        chunks = jax.tree_util.tree_map(
            lambda a: a.reshape((repeats, positions, per) + a.shape[1:]), stacked)
        spec = jax.tree_util.tree_map(lambda _: PartitionSpec(None, axis), chunks)
        body = _body(layer_fn, axis, positions, repeats, micro)
        mapped = shard_map(body, mesh=mesh, in_specs=(spec, PartitionSpec()),
                           out_specs=PartitionSpec(), axis_names=frozenset({axis}))
        return mapped(chunks, inputs)

    return run


def _body(layer_fn, axis: str, positions: int, repeats: int, micro: int):
    last = positions - 1
    work = repeats * micro
    ring = [(i, (i + 1) % positions) for i in range(positions)]

    def stage(chunk, x):
        def one(h, layer):
            return layer_fn(layer, h), None
        return lax.scan(one, x, chunk)[0]

    def varying(x):
        # Each position's carry differs from the others': say so to shard_map's types.
        pcast = getattr(lax, "pcast", None)
        if pcast is not None:
            return pcast(x, (axis,), to="varying")
        pvary = getattr(lax, "pvary", None)
        return pvary(x, (axis,)) if pvary is not None else x

    # A repeat's chunk is picked by the iteration: the backward pass would keep the picked
    # copy of every iteration. Recomputed instead (`jax.checkpoint`), it keeps only the
    # iteration's input and repeat, and reads the chunks once.
    @jax.checkpoint
    def repeat_stage(mine, r, x):
        chunk = jax.tree_util.tree_map(
            lambda a: lax.dynamic_index_in_dim(a, r, 0, keepdims=False), mine)
        return stage(chunk, x)

    def body(chunks, xs):
        p = lax.axis_index(axis)
        mine = jax.tree_util.tree_map(lambda a: a[:, 0], chunks)  # [repeat, layer, ...]
        zero = varying(jnp.zeros(xs.shape[1:], xs.dtype))
        held = varying(jnp.zeros(xs.shape, xs.dtype))  # the last position's, next repeat

        def step(carry, t):
            state, held, outs = carry
            u = t - p
            valid = (u >= 0) & (u < work)
            m = jnp.clip(u, 0, work - 1) % micro
            r = jnp.clip(u, 0, work - 1) // micro
            first_in = jnp.where(r == 0, xs[m], held[m])
            x = jnp.where(p == 0, first_in, state)
            if repeats == 1:
                # One chunk: indexed statically, so the backward pass does not keep a copy
                # of it for every iteration.
                y = stage(jax.tree_util.tree_map(lambda a: a[0], mine), x)
            else:
                y = repeat_stage(mine, r, x)
            y = jnp.where(valid, y, zero)
            got = lax.ppermute(y, axis, ring)
            # What position 0 gets is the last position's work item t - (P - 1).
            v = t - last
            came = (p == 0) & (v >= 0) & (v < work)
            mv = jnp.clip(v, 0, work - 1) % micro
            rv = jnp.clip(v, 0, work - 1) // micro
            held = jnp.where(came & (rv < repeats - 1), held.at[mv].set(got), held)
            outs = jnp.where(came & (rv == repeats - 1), outs.at[mv].set(got), outs)
            return (got, held, outs), None

        steps = jnp.arange(work + last)
        (_, _, outs), _ = lax.scan(step, (zero, held, varying(jnp.zeros(xs.shape, xs.dtype))),
                                   steps)
        # The outputs are on position 0: every position returns them.
        return lax.psum(jnp.where(p == 0, outs, jnp.zeros_like(outs)), axis)

    return body

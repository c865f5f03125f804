"""Pipeline stages run in JAX: `plan.pipeline(layer_fn)` returns `run(stacked, inputs)`.

`layer_fn(layer_params, x) -> x` is one layer; `stacked` holds every layer's parameters
stacked on a leading dimension of L layers (as `jax.lax.scan` takes them); `inputs` has a
leading dimension of the plan's `microbatches`. `run` gives what scanning `layer_fn` over
the L layers gives each microbatch, and so do its gradients, but the layers run as the
plan's stages over its pipeline axis:

- stage k holds layers k x L/S .. (k + 1) x L/S - 1 of the S = size(axis) x V stages, and
  runs on position k % size(axis) (V = 1 but for `interleaved(V)` and `looped_bfs(V)`,
  MaxText's repeats);
- the loop is `jax.shard_map` over the pipeline axis alone (the other axes stay
  automatic, so the layouts inside a stage, FSDP or tensor parallel, are XLA's to keep),
  and a microbatch's rows are split over the plan's batch axes (`model_parallel(batch =
  ...)`, the pipeline axis left out) where they divide evenly, as the batch is outside
  the pipeline: left to XLA, each device of an FSDP group ran the whole microbatch;
  `lax.ppermute` hands each microbatch's activations to the next position, and the last
  position's go back to the first for the next repeat;
- iteration t runs, on position p, work item t - p: microbatch (t - p) % M of repeat
  (t - p) // M, for V M + P - 1 iterations in all: P - 1 of them the bubble.

JAX differentiates through the loop, so the backward pass is the forward's mirror (a
repeat's chunk, picked by the iteration, is picked again there rather than kept per
iteration), and every iteration's activations are kept, as GPipe keeps them. The order a
schedule gives the backward passes (1F1B against GPipe) is memory and time for a runtime
that runs it step by step (torch, Megatron), not arithmetic: every schedule computes
this. `planc aot` sets what this loop holds beside the compiled peak
(`loops_traced`, `planc.resolve.pipeline_memory`).
"""

from __future__ import annotations

import contextlib
import contextvars
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec

from planc.diagnostics import PlanError, error
from planc.ir import PlanIR
from planc.targets.jax import sharding as target
from planc.targets.jax.compat import require

__all__ = ["pipeline", "loops_traced"]

# While `loops_traced` is open: the list each traced run adds its `PipelineLoop` to.
_TRACED: contextvars.ContextVar = contextvars.ContextVar("planc_pipeline_loops", default=None)


@contextlib.contextmanager
def loops_traced():
    """A list, filled while the block runs with a `planc.resolve.pipeline_memory.
    PipelineLoop` for every `run` of `plan.pipeline` traced (what `planc aot` sets beside
    the compiled peak)."""
    found: list = []
    token = _TRACED.set(found)
    try:
        yield found
    finally:
        _TRACED.reset(token)


def pipeline(ir: PlanIR, layer_fn, mesh=None):
    """`run(stacked, inputs)`: see the module docstring."""
    stages = ir.stages
    if stages is None:
        raise PlanError((error("P161", "`plan.pipeline` runs the plan's stages, and this plan "
                               "has no `stages`", ir.anchor,
                               help="add `stages(AXIS, microbatches = N) { ... }`"),),
                        ir.source_dict)
    if ir.explicit_axes:
        # Inside shard_map an explicit axis types each activation with its sharding, and
        # the loop's carry would change type from one iteration to the next.
        axes = ", ".join(f"`{a}`" for a in ir.explicit_axes)
        raise PlanError((error(
            "P311", f"`plan.pipeline` runs its stages over `auto` axes, and the plan makes "
            f"{axes} explicit", ir.axis_types_span or ir.anchor, label="explicit axes",
            help="write `axis_types auto` (the default) for a pipelined step; explicit "
                 "sharding inside pipeline stages is not supported yet"),), ir.source_dict)
    shard_map = require("shard_map", ir, needed_for="`plan.pipeline`")
    given = None if mesh is None else target._mesh(ir, mesh)  # a given mesh is checked now
    axis = stages.axis
    repeats, micro = stages.virtual, stages.microbatches

    def run(stacked, inputs):
        mesh, bound = given or _placement(ir)
        positions = bound.mesh.size_of(axis)
        # Inside a stage a microbatch is split over the plan's batch axes, as the batch is
        # outside it: left to XLA, every device of an FSDP group ran the whole microbatch.
        split = tuple(a for a in bound.batch_axes if a != axis)
        share = 1
        for a in split:
            share *= bound.mesh.size_of(a)
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
        # A microbatch whose rows do not divide over the batch axes is left to XLA.
        rows = (PartitionSpec(split[0] if len(split) == 1 else split)
                if split and getattr(inputs, "ndim", 0) >= 2 and inputs.shape[1] % share == 0
                else None)
        body = _body(layer_fn, axis, positions, repeats, micro, rows)
        traced = _TRACED.get()
        if traced is not None:
            traced.append(_loop(bound, layer_fn, stacked, inputs, share if rows else 1,
                                min(layers)))
        mapped = shard_map(body, mesh=mesh, in_specs=(spec, PartitionSpec()),
                           out_specs=PartitionSpec(), axis_names=frozenset({axis}))
        return mapped(chunks, inputs)

    return run


def _placement(ir: PlanIR):
    """(mesh, the plan bound to it) for a run given no mesh: the mesh the caller traces
    under (`jax.set_mesh`, as `planc aot` traces a step on a topology's devices) when its
    axes are the plan's, else the plan's mesh over this process's devices."""
    current = getattr(jax.sharding, "get_abstract_mesh", lambda: None)()
    if (current is not None and not current.empty
            and sorted(current.axis_names) == sorted(ir.mesh.names)):
        return current, target._ir_for_mesh(ir, current, abstract=True)
    return target._mesh(ir, None)


def _body(layer_fn, axis: str, positions: int, repeats: int, micro: int, rows=None):
    """The loop each position runs; `rows`, when given, is the `PartitionSpec` of a
    microbatch's rows over the batch axes."""
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
            if rows is not None:
                x = lax.with_sharding_constraint(x, rows)
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
        kept = jnp.where(p == 0, outs, jnp.zeros_like(outs))
        if jnp.issubdtype(kept.dtype, jnp.floating) and kept.dtype.itemsize < 4:
            # Summed in float32: one addend is not zero, so the sum is exact, and XLA:CPU
            # (jax 0.10) aborts the process compiling a 16-bit all-reduce here.
            return lax.psum(kept.astype(jnp.float32), axis).astype(kept.dtype)
        return lax.psum(kept, axis)

    return body


def _loop(ir: PlanIR, layer_fn, stacked, inputs, share: int, layers: int):
    """The `PipelineLoop` of one traced run: a microbatch's share of a device, and what
    JAX's backward pass keeps of one layer's forward on it (`residual_bytes`), traced on
    the shapes a device computes with: each layer's weights narrowed by the axes their
    layouts split them over but the batch axes (FSDP gathers them), the rows by `share`.
    Where the layouts cannot be read, or the layer does not trace on those shapes, on the
    whole shapes (rows still split)."""
    from planc.resolve.pipeline_memory import PipelineLoop

    x = jax.ShapeDtypeStruct((inputs.shape[1] // share,) + tuple(inputs.shape[2:]),
                             inputs.dtype)
    # The batch axes and the pipeline axis narrow no weight a device computes with.
    skip = set(ir.batch_axes) | {ir.stages.axis}
    sizes = {n: 1 if n in skip else k for n, k in zip(ir.mesh.names, ir.mesh.shape)}
    whole = jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(tuple(a.shape[1:]), a.dtype), stacked)
    one = whole
    _, leaves, assignments, errors = target._tree_assignments(ir, stacked)
    if not errors:
        local = [jax.ShapeDtypeStruct(a.layout.shard_shape(tuple(leaf.shape), sizes)[1:],
                                      leaf.dtype)
                 for (_, leaf), a in zip(leaves, assignments)]
        one = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(stacked), local)
    kept = residual_bytes(layer_fn, one, x)
    if kept is None and one is not whole:
        kept, one = residual_bytes(layer_fn, whole, x), whole
    return PipelineLoop(microbatches=int(inputs.shape[0]), layers=layers,
                        boundary=_nbytes(x), residuals=kept,
                        layer=sum(_nbytes(a) for a in jax.tree_util.tree_leaves(one)))


def _nbytes(a) -> int:
    return math.prod(a.shape) * a.dtype.itemsize


def residual_bytes(layer_fn, layer_params, x) -> int | None:
    """The bytes JAX's backward pass of `layer_fn(layer_params, x)` keeps from the forward
    (its residuals: the input and what the layer computed from it), the layer's own
    parameters left out; None where the layer does not trace on these shapes.

    >>> import jax, jax.numpy as jnp
    >>> p = {"w": jax.ShapeDtypeStruct((4, 16), jnp.float32)}
    >>> residual_bytes(lambda p, x: jnp.tanh(x @ p["w"]), p,  # x; tanh's output and slope
    ...                jax.ShapeDtypeStruct((2, 4), jnp.float32))
    288
    """
    try:
        closed = jax.make_jaxpr(lambda p, h: jax.vjp(layer_fn, p, h)[1])(layer_params, x)
    except Exception:  # a layer that needs other shapes: the caller falls back
        return None
    jaxpr = closed.jaxpr
    params = set(jaxpr.invars[:len(jax.tree_util.tree_leaves(layer_params))])
    constants = set(jaxpr.constvars)
    seen: set = set()
    total = 0
    for v in jaxpr.outvars:
        if hasattr(v, "val") or v in params or v in seen or v in constants:
            continue  # a literal, a parameter, counted already, or a closed-over constant
        seen.add(v)
        aval = v.aval
        total += int(aval.size) * aval.dtype.itemsize
    return total

"""The stages every compiled step goes through, whatever built it (`step` for a JAX
step, `keras_step` for a Keras model): the plan's mesh on the topology (`placement`),
then the compile and the report (`compile_arguments`).

Arguments in pinned host memory (layouts `on host`) are not device memory: they are
left out of the largest arguments and of the plan changes P807 suggests, and their bytes
are the report's `host_*` figures. XLA:TPU counts them there itself; XLA:CPU counts them
with the device's, so on `cpu:N` they are moved there (`_host_apart`) before the peak is
estimated.
"""

from __future__ import annotations

import functools

from planc.diagnostics import PlanError
from planc.ir import PlanIR
from planc.resolve import human_bytes
from planc.targets.aot.arguments import StepProblem
from planc.targets.aot.budget import Contributor, no_topology, peak_findings
from planc.targets.aot.collectives import collectives
from planc.targets.aot.compiler import compile_step, mirrored_outputs, output_shapes
from planc.targets.aot.feasibility import Placement, place, slice_count
from planc.targets.aot.remat import remat_diagnostics
from planc.targets.aot.report import AotReport, Parameter, Program, StagePeak, largest
from planc.targets.aot.topology import Topology, TopologyError, load_topology
from planc.targets.jax.compat import require_host_outputs

__all__ = ["placement", "contributors", "compile_arguments", "raise_for"]


def raise_for(ir: PlanIR, *diags) -> None:
    raise PlanError(tuple(d if d.span or d.file else d._replace(file=ir.file) for d in diags),
                    ir.source_dict)


def placement(ir: PlanIR, topology) -> Placement:
    """The plan's mesh on `topology` (a name, or a loaded `Topology`); `PlanError` (P201,
    P801-P804, P808)."""
    if topology is None:
        if ir.budget is not None and ir.budget.peak is not None:
            raise_for(ir, no_topology(ir))
        raise TypeError('plan.aot needs topology=: a TPU topology such as "v5e:2x4", or '
                        '"cpu:N" for N simulated CPU devices')
    if isinstance(topology, Topology):
        return place(ir, topology)
    try:
        loaded = load_topology(topology, slice_count(ir))
    except TopologyError as exc:
        raise_for(ir, exc.diagnostic)
    return place(ir, loaded)


def contributors(params, states) -> list[Contributor]:
    """Each parameter with the optimizer slots that mirror it: their per-device bytes."""
    import jax

    specs = [s.spec for s in jax.tree_util.tree_leaves(params.shardings)]
    shapes = [tuple(leaf.shape) for leaf in jax.tree_util.tree_leaves(params.tree)]
    # Only device memory: a parameter `on host` (and the slots mirroring it) holds none.
    totals = [0 if host else b for (_, b, _), host in zip(params.leaves, params.host)]
    slots = [0] * len(totals)
    for state in states:
        for i, (_, b, _), host in zip(state.mirrors, state.leaves, state.host):
            if i is not None and not host:
                totals[i] += b
                slots[i] += 1
    return [Contributor(path, shape, spec, total, n, rule.where if rule is not None else None)
            for (path, _, _), shape, spec, total, n, rule in
            zip(params.leaves, shapes, specs, totals, slots, params.rules)]


def compile_arguments(where: Placement, step, arguments, *, mirrored: int, donate: bool,
                      names: str, found=(), contributors=()) -> AotReport:
    """Compile `step(*arguments)`: its first `mirrored` outputs take (and, with `donate`,
    alias) its first `mirrored` arguments; the report of what XLA made of it."""
    ir, mesh, topology = where.ir, where.mesh, where.topology
    trees = [a.tree for a in arguments]
    if topology.platform == "cpu" and any(h for a in arguments for h in a.host):
        require_host_outputs(ir, ir.host_rules(outputs=False), mesh)  # P340 on jax 0.7's XLA:CPU
    device_leaves = [leaf for a in arguments for leaf, h in zip(a.leaves, a.host) if not h]
    from planc.targets.jax.pipeline import loops_traced

    try:
        with loops_traced() as loops:  # `plan.pipeline` runs the step traces
            # A new function each time: JAX keeps the trace of a function it has seen
            # with these shapes, and a run not traced again would report no loop.
            out = output_shapes(ir, mesh, functools.wraps(step)(lambda *a: step(*a)), trees)
        out_shardings = mirrored_outputs(ir, mesh, out, arguments, mirrored, names)
        compiled = compile_step(ir, mesh, step, arguments, out_shardings,
                                tuple(range(mirrored)) if donate else (), topology.platform)
    except StepProblem as exc:
        d = exc.diagnostic
        if d.code == "P809":  # what the arguments hold of it, as a P807 says
            top = largest(device_leaves, 3)[0]
            d = d._replace(help=d.help + ("largest arguments per device: " + ", ".join(
                f"`{p}` {human_bytes(b)}" for p, b in top),))
        raise_for(ir, d)
    memory = dict(compiled.memory)
    if topology.estimate:
        host = [sum(b for (_, b, _), h in zip(a.leaves, a.host) if h) for a in arguments]
        _host_apart(memory, sum(host), sum(host[:mirrored]), donate)
        # XLA:CPU's own peak leaves the temporaries out.
        memory["peak"] = memory["argument"] + memory["output"] - memory["alias"] + memory["temp"]
    by_variable, by_rule = largest(device_leaves)
    sizes = dict(zip(ir.mesh.names, ir.mesh.shape))
    parameters = _parameters(arguments[0])
    diagnostics = list(where.diagnostics) + list(found) + peak_findings(
        ir, topology.label, memory, topology.estimate, by_variable, contributors, sizes)
    diagnostics += remat_diagnostics(ir, compiled.remats, parameters)
    return AotReport(
        plan=ir.name, file=ir.file, topology=topology.label, platform=topology.platform,
        device_kind=topology.device_kind, devices=len(topology.devices),
        slices=topology.slices, estimate=topology.estimate, mesh=sizes, donate=donate,
        memory=memory, collectives=_collectives(compiled.hlo, ir, mesh, topology),
        largest_variables=by_variable, largest_rules=by_rule,
        compile_seconds=compiled.seconds,
        budget_peak=ir.budget.peak if ir.budget is not None else None,
        diagnostics=tuple(diagnostics), sources=ir.source_dict,
        program=Program(compiled.hlo, mesh, tuple(a.name for a in ir.mesh.axes if a.slices > 1),
                        parameters, compiled.executable),
        stages=_stage_peaks(ir, arguments, memory, loops))


def _stage_peaks(ir, arguments, memory, loops):
    """Per pipeline position, the analytic bytes of its stages, and what
    `plan.pipeline`'s loop holds there by planc's analytic model, next to the compile's
    figures (`StagePeak`); None without `stages`, or where the stages have errors."""
    if ir.stages is None:
        return None
    import jax

    from planc.resolve import validate
    from planc.resolve.pipeline_memory import loop_memory, schedule_activations
    from planc.variables import Variable

    params = arguments[0]
    head = params.name + "/"  # the leaves' paths as the plan resolved them, in `params`
    leaves = jax.tree_util.tree_leaves(params.tree)
    report = validate(ir, [Variable(path[len(head):] if path.startswith(head) else path,
                                    tuple(leaf.shape), str(leaf.dtype))
                           for (path, _, _), leaf in zip(params.leaves, leaves)])
    staged = report.stages
    if staged is None or any(d.is_error for d in staged.diagnostics):
        return None
    # The loop traced with the most residuals, where the step ran several.
    loop = max(loops, key=lambda x: (x.residuals or 0, x.layers), default=None)
    # Every argument as placed: the optimizer state the step is really given, whatever
    # `budget(state)` says.
    placed = sum(b for a in arguments for (_, b, _), h in zip(a.leaves, a.host) if not h)
    out = []
    for position in range(staged.positions):
        rows = [r for r in staged.rows if r.position == position]
        held = loop_memory(report, position, loop, placed) if loop else None
        # What `plan.shardings` places on the position: a variable placed `first` by its
        # path is on every position's devices too.
        out.append(StagePeak(position, tuple(r.index for r in rows),
                             None if staged.placed_param_bytes is None else
                             staged.placed_param_bytes + (staged.placed_state_bytes or 0),
                             memory["argument"], memory["peak"], held,
                             schedule_activations(report, position, loop) if loop else None))
    return tuple(out)


def _parameters(argument):
    """The first argument's leaves as the cost model names them (path, shapes, layout,
    rule)."""
    import jax

    shapes = [tuple(leaf.shape) for leaf in jax.tree_util.tree_leaves(argument.tree)]
    shardings = jax.tree_util.tree_leaves(argument.shardings)
    return tuple(
        Parameter(path, shape, s.shard_shape(shape), tuple(s.spec) + (None,) * (len(shape) - len(s.spec)),
                  label)
        for (path, _, label), shape, s in zip(argument.leaves, shapes, shardings))


def _collectives(hlo: str, ir: PlanIR, mesh, topology):
    """The step's collectives on the plan's axes. Compiled for several slices, the
    program is one slice's: its device ids are slice 0's devices in mesh order."""
    positions, across = None, ()
    if topology.slices > 1:
        positions = [i for i, d in enumerate(mesh.devices.flat)
                     if getattr(d, "slice_index", 0) == 0]
        across = tuple(a.name for a in ir.mesh.axes if a.slices > 1)
    return collectives(hlo, ir.mesh.shape, ir.mesh.names, slice_positions=positions,
                       slice_axes=across)


def _host_apart(memory: dict, arguments: int, outputs: int, donate: bool) -> None:
    """Move the bytes per device of the arguments in pinned host memory, and of the
    outputs that take their shardings (aliased to them when donated), from XLA:CPU's
    device figures to the `host_*` ones; nothing where XLA counted host memory itself."""
    if memory["host_argument"] or memory["host_output"]:
        return
    for key, n in (("argument", arguments), ("output", outputs),
                   ("alias", outputs if donate else 0)):
        n = min(n, memory[key])
        memory[key] -= n
        memory["host_" + key] += n

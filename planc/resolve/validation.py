"""Validation of a plan against a model: `validate(ir, model, devices) -> Report`.

The plan is bound to the device count, every variable resolved (`Resolver.resolve_all`),
its optimizer slots too when the plan has `state` rules, the memory each device holds
worked out (`planc.resolve.memory`), and the findings only the whole model shows added
(`planc.resolve.whole_model`).
"""

from __future__ import annotations


from planc.check.base import listing
from planc.check.binding import bind
from planc.gc_pause import collector_paused
from planc.diagnostics import Diagnostic, Label, note, unique
from planc.ir import LogicalAxis, PlanIR
from planc.progress import with_progress
from planc.resolve.whole_model import (budget_findings, large_replicated_findings,
                                       replicated_state_findings, skipped_findings)
from planc.resolve.resolution import slot_assignments
from planc.resolve.memory import itemised_bytes, memory_summary, shard_bytes
from planc.resolve.report import Report
from planc.resolve.resolver import Resolver
from planc.variables import Variable


def validate(ir: PlanIR, model, devices: int | None = None, *, progress: bool = False) -> Report:
    """Validate the plan `ir` against `model` on `devices` devices; returns a `Report`.

    `model` is anything `planc.sources.load_variables` reads (a Keras model, a pytree,
    a checkpoint path, a manifest, ``"module:attr"``) or a sequence of `Variable`; a
    source that cannot be read raises `planc.sources.SourceError`. With `devices`, the
    plan is bound to that count first (a count that does not fit the mesh is reported
    as P201 in the report, not raised) and every diagnostic carries `devices`. With an
    `auto` axis and no count, what depends on the count is skipped and one P202 note
    says what. `progress` shows a progress bar on a terminal's stderr for large models.
    """
    with collector_paused():  # a variable, an assignment and a report row per variable
        return _validate(ir, model, devices, progress)


def _validate(ir: PlanIR, model, devices: int | None, progress: bool) -> Report:
    variables = _variables(model)
    found: list[Diagnostic] = []
    if devices is not None:
        binding = bind(ir, devices)
        found += binding.problems
        if binding.ir is None:
            return _finish(ir, (), found, devices, None, variables)
        ir = binding.ir
    resolver = Resolver(ir)
    resolution = resolver.resolve_all(with_progress(variables, progress))
    found += resolution.diagnostics
    slots = ()
    if ir.has_state_rules:
        state = Resolver(ir, "state").resolve_all(variables)
        found += state.diagnostics
        slots = slot_assignments(resolution.assignments, state.assignments)
    elif ir.itemised_memory:  # every slot mirrors its parameter
        slots = resolution.assignments
    if ir.logical_axes:
        found += unused_logical_names(ir, variables)
    return _finish(ir, resolution.assignments, found, devices, resolver, variables, slots)


def unused_logical_names(ir: PlanIR, variables) -> list[Diagnostic]:
    """P345 for the `axes` names that no rule's layout writes and no variable names: one
    note for them all."""
    used = {n for v in variables if v.names for n in v.names}
    for r in ir.rules + ir.state + ir.outputs + tuple(
            d for d in (ir.default, ir.state_default, ir.outputs_default) if d is not None):
        for alt in r.layout.alternatives:
            for d in alt.head + alt.tail:
                used.update(d.logical)
    unused: dict[str, LogicalAxis] = {}
    for e in ir.logical_axes:
        if e.name not in used:
            unused.setdefault(e.name, e)
    if not unused:
        return []
    # One note, however many names: a generated table of thousands would bury the report.
    entries = list(unused.values())
    names = [e.name for e in entries]
    said = (f"logical name `{names[0]}` is" if len(names) == 1 else
            f"{len(names):,} logical names, {listing(names, 5)}, are")
    return [note(
        "P345", f"{said} written in no layout and named by no variable of the model",
        entries[0].span, label="no variable uses it",
        secondary=tuple(Label(e.span, "nor this one") for e in entries[1:5]),
        help="an activation constrained by `plan.logical_constraint` may use "
             f"{'it' if len(names) == 1 else 'them'}; otherwise remove the "
             f"{'entry' if len(names) == 1 else 'entries'} or correct the "
             f"name{'s' if len(names) > 1 else ''} (`planc explain` shows the names the model "
             "gives its variables)")]


def resolved(ir: PlanIR, model, devices: int | None = None) -> tuple:
    """The assignments `validate(ir, model, devices)` reports, in model order; raises
    `PlanError`, with every diagnostic of that report, when it has an error.

    Of what only the whole model shows, just the `budget`'s finding (P309) can be an
    error. So without a budget and a device count, the model is read and resolved and no
    more: the memory figures are worked out only to report an error found on the way.
    """
    with collector_paused():
        variables = _variables(model)
        if ir.budget is None and devices is None and not ir.has_state_rules:
            resolution = Resolver(ir).resolve_all(variables)
            if not any(d.is_error for d in resolution.diagnostics):
                return resolution.assignments
        # The variables already read are validated: a `module:attr` runs once.
        report = _validate(ir, variables, devices, False)
    report.raise_for_errors()
    return report.assignments


def _variables(model) -> tuple[Variable, ...]:
    # A tuple of Variables with distinct paths is what load_variables returns: taken as
    # it is, so lint's several device counts do not re-check a large model each time.
    if isinstance(model, tuple) and all(type(v) is Variable for v in model) and \
            len({v.path for v in model}) == len(model) and model:
        return model
    from planc.sources import load_variables

    return load_variables(model)


def _is_count(devices) -> bool:
    return isinstance(devices, int) and not isinstance(devices, bool) and devices > 0


def _finish(ir: PlanIR, assignments, found: list[Diagnostic], devices: int | None,
            resolver: Resolver | None, variables, slots=()) -> Report:
    sizes = {a.name: a.global_size for a in ir.mesh.axes}
    count = ir.mesh.device_count
    cache: dict = {}  # most variables share their shape and layout with many others
    get = cache.get
    hits = []
    append = hits.append
    for (path, shape, dtype, _), layout, _, _ in assignments:
        key = (id(layout), shape, dtype)  # the assignments keep each layout alive
        hit = get(key)
        if hit is None:
            shard = layout.shard_shape(shape, sizes)
            hit = cache[key] = (shard, None if shard is None else shard_bytes(shard, dtype),
                                Variable(path, shape, dtype).nbytes, layout.is_replicated)
        append(hit)
    # One pass above, then the four columns at C speed.
    shards, per_device, sizes_of, replicated = (
        [list(column) for column in zip(*hits)] if hits else ([], [], [], []))
    total = sum(sizes_of) if assignments else sum(v.nbytes for v in variables)
    kinds = None
    if slots:
        kinds = itemised_bytes(ir, assignments, per_device, slots, sizes)
    staged = None
    if ir.stages is not None and assignments:
        from planc.resolve.stages import place_stages

        staged = place_stages(ir, assignments, per_device, kinds.slot if kinds else None)
        if staged is not None:
            found += staged.diagnostics
    positions = staged.positions_of_variables() if staged is not None else None
    memory = memory_summary(ir, assignments, per_device, sizes_of, replicated, total, count,
                            len(variables), kinds, positions)
    if resolver is not None:
        found += budget_findings(ir, memory)
        found += large_replicated_findings(ir, assignments, sizes_of, replicated, count, sizes)
        if slots:
            found += replicated_state_findings(ir, slots, sizes_of, count, sizes)
        if count is None:
            found += skipped_findings(ir, assignments, memory)
    if _is_count(devices):
        found = [d if d.devices is not None else d._replace(devices=devices) for d in found]
    diags = tuple(sorted(unique(found), key=Diagnostic.sort_key))
    mesh = {a.name: a.global_size for a in ir.mesh.axes}
    shown = devices if _is_count(devices) else count
    return Report(ir.name, ir.file, diags, tuple(assignments), shown, mesh, memory,
                  tuple(shards), tuple(per_device), ir.source_dict, ir, tuple(slots), kinds,
                  staged)

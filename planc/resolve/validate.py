"""Validation of a plan against a model: `validate(plan, model, devices) -> Report`.

The resolver (`planc.resolve`) decides each variable's layout and reports what is wrong
with single variables and single rules (P301-P308). This module adds what needs the
whole model at once: the memory each device holds, the `budget` (P309), large variables
left replicated (P310), and the P202 note that says what could not be checked while an
`auto` axis has no device count.

Memory figures assume what JAX does with an evenly divisible `NamedSharding`: every
device holds one shard of every variable, so the most loaded device holds the sum of
the shard sizes. Sub-byte dtypes count fractional bytes, rounded up per shard.

`Report.to_dict()` is the JSON form, schema ``planc.report/1``::

    {
      "schema": "planc.report/1",
      "plan": "gemma", "file": "plans/gemma.kd",
      "devices": 8,                       # null: an `auto` axis without a count
      "mesh": {"batch": 4, "model": 2},   # mesh order; null for an unresolved `auto`
      "ok": true,                         # no errors
      "variables": [ VARIABLE, ... ],     # model order
      "memory": MEMORY,
      "diagnostics": [ ... ],             # planc.diagnostics.formats.diagnostic_dict, sorted
      "summary": {"errors": 0, "warnings": 1, "notes": 0}
    }

    VARIABLE = {
      "path": "decoder_block_0/attention/query/kernel",
      "shape": [8, 2048, 256], "dtype": "bfloat16",
      "axes": ["model", "batch", null],   # per dimension: null | "axis" | ["a", "b"]
      "partition_spec": ["model", "batch", null],   # the same, as `P(*axes)` takes it
      "blocks": [1, 1, 1],
      "shard_shape": [4, 512, 256],       # null while an `auto` size is unknown
      "bytes": 8388608,
      "bytes_per_device": 1048576,        # null while an `auto` size is unknown
      "replicated": false,
      "rule": {"file": "plans/gemma.kd", "line": 14, "pattern": "decoder_block..."}
               # pattern null for `default`; the whole field null when no rule applied
      "alternative": 0                    # which `|` alternative was taken; -1: none fit
    }

    MEMORY = {
      "variables": 164, "total_bytes": ..., "devices": 8,
      "per_device_bytes": ...,            # the most loaded device; null if unknown
      "ideal_bytes": ...,                 # total / devices; null if unknown
      "overhead": 1.02,                   # per_device / ideal; null if unknown
      "state": 1, "budget_bytes": null,   # from `budget(per_device = ..., state = ...)`
      "largest_replicated": [{"path": ..., "bytes": ...}, ...],   # at most 5
      "largest_per_device": [{"path": ..., "bytes_per_device": ...}, ...]   # at most 5
    }
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from planc.diagnostics import (Diagnostic, PlanError, error, note, severity_counts, unique,
                               warning)
from planc.check.binding import bind
from planc.ir import PlanIR
from planc.resolve.resolver import Assignment, ResolvedLayout, Resolver, _escape
from planc.variables import Variable, itemsize

__all__ = ["LARGE_REPLICATED_BYTES", "MemorySummary", "Report", "human_bytes", "validate"]

# A fully replicated variable at least this large, on more than one device, gets P310:
# 64 MiB is where replicating one tensor starts to cost real accelerator memory, and
# no norm scale or bias of a real model comes near it.
LARGE_REPLICATED_BYTES = 64 * 2**20

# The progress bar appears for models with more variables than this, or once
# resolution has taken longer than PROGRESS_AFTER_S seconds.
PROGRESS_MIN_VARIABLES = 20_000
PROGRESS_AFTER_S = 1.0
_PROGRESS_STEP = 1024  # variables between progress updates (and clock checks)

_TOP = 5  # contributors listed in summaries and in the P309 help


def human_bytes(n: float | None) -> str:
    """`n` bytes in binary units with three significant digits.

    >>> human_bytes(512), human_bytes(1536), human_bytes(2 * 2**30), human_bytes(None)
    ('512 B', '1.50 KiB', '2.00 GiB', '?')
    """
    if n is None:
        return "?"
    if n < 1024:
        return f"{int(n)} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            break
    if value < 10:
        return f"{value:.2f} {unit}"
    if value < 100:
        return f"{value:.1f} {unit}"
    return f"{value:.0f} {unit}"


@dataclass(frozen=True)
class MemorySummary:
    """What the variables cost: in total, on the most loaded device, and ideally.

    `per_device_bytes`, `ideal_bytes` and `overhead` are None while an `auto` axis has
    no size. `overhead` is per-device over ideal: 1.0 is a perfect split, `devices`
    means everything is replicated.
    """

    variables: int
    total_bytes: int
    devices: int | None
    per_device_bytes: int | None
    ideal_bytes: float | None
    overhead: float | None
    largest_replicated: tuple[tuple[str, int], ...] = ()
    largest_per_device: tuple[tuple[str, int], ...] = ()
    state: int = 1
    budget_bytes: int | None = None

    def to_dict(self) -> dict:
        return {
            "variables": self.variables,
            "total_bytes": self.total_bytes,
            "devices": self.devices,
            "per_device_bytes": self.per_device_bytes,
            "ideal_bytes": self.ideal_bytes,
            "overhead": None if self.overhead is None else round(self.overhead, 6),
            "state": self.state,
            "budget_bytes": self.budget_bytes,
            "largest_replicated": [{"path": p, "bytes": b} for p, b in self.largest_replicated],
            "largest_per_device": [{"path": p, "bytes_per_device": b}
                                   for p, b in self.largest_per_device],
        }


@dataclass(frozen=True)
class Report:
    """The result of `validate`: diagnostics, each variable's layout, and memory.

    `diagnostics` are sorted by `Diagnostic.sort_key` and hold what validation against
    the model found (the plan's own warnings stay in `plan.diagnostics`). `assignments`
    follow the model's order; `shard_shapes` and `bytes_per_device` run parallel to them.
    """

    plan_name: str
    file: str
    diagnostics: tuple[Diagnostic, ...]
    assignments: tuple[Assignment, ...]
    devices: int | None
    mesh: dict
    memory: MemorySummary
    shard_shapes: tuple[tuple[int, ...] | None, ...] = field(default=(), repr=False)
    bytes_per_device: tuple[int | None, ...] = field(default=(), repr=False)
    sources: dict = field(default_factory=dict, repr=False, compare=False)
    ir: PlanIR | None = field(default=None, repr=False, compare=False)  # as validated

    @property
    def ok(self) -> bool:
        """True when no diagnostic is an error."""
        return not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def layouts(self) -> dict[str, ResolvedLayout]:
        """`{path: layout}` in model order."""
        return {a.variable.path: a.layout for a in self.assignments}

    def raise_for_errors(self) -> None:
        """Raise `PlanError` carrying every diagnostic if any of them is an error."""
        if not self.ok:
            raise PlanError(self.diagnostics, dict(self.sources))

    # -- rendering ------------------------------------------------------------------------

    def summary_lines(self) -> list[tuple[str, str]]:
        """(label, value) pairs of the memory summary, as `render` and explain print them."""
        m = self.memory
        n = m.devices
        lines = [("total", f"{human_bytes(m.total_bytes)} in {m.variables} "
                           f"variable{'s' if m.variables != 1 else ''}")]
        if m.per_device_bytes is None and not self.assignments:
            lines.append(("per device", "unknown: the plan does not fit this device count"))
        elif m.per_device_bytes is None:
            lines.append(("per device", "unknown: an `auto` axis has no size (pass --devices)"))
        else:
            where = f"on each of {n} devices" if n else "per device"
            lines.append(("per device", f"{human_bytes(m.per_device_bytes)} {where} "
                                        "(the most loaded)"))
        if m.ideal_bytes is not None:
            lines.append(("ideal", f"{human_bytes(m.ideal_bytes)} (total / {n})"))
        if m.overhead is not None:
            lines.append(("overhead", f"{m.overhead:.2f}x the ideal: what is not split over "
                                      "every device is held more than once"))
        if m.budget_bytes is not None and m.per_device_bytes is not None:
            need = m.per_device_bytes * m.state
            state = f" x {m.state} (state)" if m.state != 1 else ""
            verdict = "fits" if need <= m.budget_bytes else "OVER BUDGET"
            lines.append(("budget", f"{human_bytes(m.per_device_bytes)}{state} = "
                                    f"{human_bytes(need)} of {human_bytes(m.budget_bytes)}: "
                                    f"{verdict}"))
        for i, (p, b) in enumerate(m.largest_replicated):
            lines.append(("largest replicated" if i == 0 else "", f"{human_bytes(b):>9}  {p}"))
        return lines

    def render(self, color: bool = False) -> str:
        """Diagnostics (as the CLI prints them), then the memory summary."""
        from planc.diagnostics.text import render_text

        text = render_text(self.diagnostics, self.sources, color=color)
        width = max(len(k) for k, _ in self.summary_lines())
        head = f"plan {self.plan_name}" + (f" on {self.devices} devices" if self.devices else "")
        summary = "\n".join([head] + [f"  {k.ljust(width)}  {v}" for k, v in self.summary_lines()])
        return (text + "\n\n" if text else "") + summary

    def __rich__(self):
        from rich.text import Text

        return Text.from_ansi(self.render(color=True))

    def __str__(self) -> str:
        return self.render(color=False)

    # -- JSON ----------------------------------------------------------------------------

    def variable_dicts(self) -> list[dict]:
        """One `VARIABLE` object (see the module docstring) per variable, in model order."""
        cache: dict = {}
        return [variable_dict(a, s, b, cache) for a, s, b in
                zip(self.assignments, self.shard_shapes, self.bytes_per_device)]

    def to_dict(self) -> dict:
        """The JSON form, schema `planc.report/1` (see the module docstring)."""
        from planc.diagnostics.formats import diagnostic_dict

        return {
            "schema": "planc.report/1",
            "plan": self.plan_name,
            "file": self.file,
            "devices": self.devices,
            "mesh": dict(self.mesh),
            "ok": self.ok,
            "variables": self.variable_dicts(),
            "memory": self.memory.to_dict(),
            "diagnostics": [diagnostic_dict(d) for d in self.diagnostics],
            "summary": severity_counts(self.diagnostics),
        }


def axes_json(axes) -> list:
    """Keras `TensorLayout.axes` as JSON: None, "axis" or ["a", "b"] per dimension."""
    return [list(e) if isinstance(e, tuple) else e for e in axes]


def variable_dict(a: Assignment, shard: tuple[int, ...] | None, per_device: int | None,
                  cache: dict | None = None) -> dict:
    """The `VARIABLE` JSON object of one assignment (`cache` shares work between calls)."""
    cache = {} if cache is None else cache
    v = a.variable
    key = (id(a.layout), id(a.rule))  # ids: the objects outlive the cache; hashing is deep
    common = cache.get(key)
    if common is None:
        rule = None
        if a.rule is not None:
            span = a.rule.span
            rule = {"file": span.file if span else None,
                    "line": span.line if span else None, "pattern": a.rule.pattern}
        common = cache[key] = (axes_json(a.layout.axes), list(a.layout.blocks),
                               a.layout.is_replicated, rule)
    axes, blocks, replicated, rule = common
    return {
        "path": v.path,
        "shape": list(v.shape),
        "dtype": v.dtype,
        "axes": list(axes),
        "partition_spec": list(axes),
        "blocks": list(blocks),
        "shard_shape": None if shard is None else list(shard),
        "bytes": v.nbytes,
        "bytes_per_device": per_device,
        "replicated": replicated,
        "rule": None if rule is None else dict(rule),
        "alternative": a.alternative,
    }


# -- validation ------------------------------------------------------------------------------

def validate(plan, model, devices: int | None = None, *, progress: bool = False) -> Report:
    """Validate `plan` against `model` on `devices` devices; returns a `Report`.

    `model` is anything `planc.sources.load_variables` reads (a Keras model, a pytree,
    a checkpoint path, a manifest, ``"module:attr"``) or a sequence of `Variable`; a
    source that cannot be read raises `planc.sources.SourceError`. With `devices`, the
    plan is bound to that count first (a count that does not fit the mesh is reported
    as P201 in the report, not raised) and every diagnostic carries `devices`. With an
    `auto` axis and no count, what depends on the count is skipped and one P202 note
    says what. `progress` shows a progress bar on a terminal's stderr for large models.
    """
    variables = _variables(model)
    ir: PlanIR = plan.ir
    found: list[Diagnostic] = []
    if devices is not None:
        binding = bind(plan.ir, devices)
        ir = binding.ir
        found += binding.problems
        if ir is None:
            return _finish(plan.ir, (), found, devices, None, variables)
    resolver = Resolver(ir)
    resolution = resolver.resolve_all(_with_progress(variables, progress))
    found += resolution.diagnostics
    return _finish(ir, resolution.assignments, found, devices, resolver, variables)


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


def _with_progress(variables: Sequence[Variable], enabled: bool) -> Iterable[Variable]:
    if not enabled:
        return variables
    return _progress_iter(variables)


def _progress_iter(variables: Sequence[Variable]):
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield from variables
        return
    total = len(variables)
    start = time.monotonic()
    bar = task = None
    try:
        for i, var in enumerate(variables):
            if i % _PROGRESS_STEP == 0:
                if bar is None and (total > PROGRESS_MIN_VARIABLES or
                                    time.monotonic() - start > PROGRESS_AFTER_S):
                    bar = _progress_bar(console)
                    task = bar.add_task("validating", total=total)
                    bar.start()
                if bar is not None:
                    bar.update(task, completed=i)
            yield var
    finally:
        if bar is not None:
            bar.update(task, completed=total)
            bar.stop()


def _progress_bar(console):
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeRemainingColumn)

    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeRemainingColumn(), console=console,
                    transient=True)


def _finish(ir: PlanIR, assignments, found: list[Diagnostic], devices: int | None,
            resolver: Resolver | None, variables) -> Report:
    sizes = {a.name: a.global_size for a in ir.mesh.axes}
    count = ir.mesh.device_count
    shards, per_device, sizes_of, replicated = [], [], [], []
    cache: dict = {}  # most variables share their shape and layout with many others
    for a in assignments:
        v = a.variable
        key = (id(a.layout), v.shape, v.dtype)  # the assignments keep each layout alive
        hit = cache.get(key)
        if hit is None:
            shard = a.layout.shard_shape(v.shape, sizes)
            hit = cache[key] = (shard, None if shard is None else _shard_bytes(shard, v.dtype),
                                v.nbytes, a.layout.is_replicated)
        shards.append(hit[0])
        per_device.append(hit[1])
        sizes_of.append(hit[2])
        replicated.append(hit[3])
    total = sum(sizes_of) if assignments else sum(v.nbytes for v in variables)
    memory = _memory(ir, assignments, per_device, sizes_of, replicated, total, count,
                     len(variables))
    if resolver is not None:
        found += _budget(ir, memory, per_device, assignments)
        found += _large_replicated(ir, assignments, sizes_of, replicated, count, sizes)
        if count is None:
            found += _skipped(ir, assignments, memory)
    if _is_count(devices):
        found = [d if d.devices is not None else replace(d, devices=devices) for d in found]
    diags = tuple(sorted(unique(found), key=Diagnostic.sort_key))
    mesh = {a.name: a.global_size for a in ir.mesh.axes}
    shown = devices if _is_count(devices) else count
    return Report(ir.name, ir.file, diags, tuple(assignments), shown, mesh, memory,
                  tuple(shards), tuple(per_device), ir.source_dict, ir)



def _shard_bytes(shard: tuple[int, ...], dtype: str) -> int:
    n = 1
    for d in shard:
        n *= d
    return math.ceil(n * itemsize(dtype))


def _memory(ir: PlanIR, assignments, per_device, nbytes, replicated, total: int,
            count: int | None, n_variables: int) -> MemorySummary:
    known = bool(assignments) and all(b is not None for b in per_device)
    most = sum(per_device) if known else None
    ideal = total / count if count else None
    overhead = (most / ideal) if (most is not None and ideal) else None
    copies = []
    if count is None or count > 1:
        copies = [(a.variable.path, n) for a, n, r in zip(assignments, nbytes, replicated)
                  if r and n > 0]
    heavy = [(a.variable.path, b) for a, b in zip(assignments, per_device) if b]
    budget = ir.budget
    return MemorySummary(n_variables, total, count, most, ideal, overhead,
                         _largest(copies), _largest(heavy),
                         budget.state if budget else 1,
                         budget.per_device if budget else None)


def _largest(items: list[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    """The `_TOP` largest (path, bytes), ties in model order."""
    return tuple(heapq.nsmallest(_TOP, items, key=lambda t: -t[1]))


def _budget(ir: PlanIR, memory: MemorySummary, per_device, assignments) -> list[Diagnostic]:
    budget = ir.budget
    if budget is None or memory.per_device_bytes is None:
        return []
    need = memory.per_device_bytes * budget.state
    if need <= budget.per_device:
        return []
    state = (f" x {budget.state} (parameters and optimizer state) = {human_bytes(need)}"
             if budget.state != 1 else "")
    top = ", ".join(f"`{p}` {human_bytes(b)}" for p, b in memory.largest_per_device)
    devices = f" on {memory.devices} devices" if memory.devices else ""
    return [error(
        "P309", f"the variables need {human_bytes(memory.per_device_bytes)} per device{state}"
        f"{devices}, over the budget of {human_bytes(budget.per_device)}", budget.span,
        label=f"{human_bytes(budget.per_device)} per device",
        help=(f"largest per device: {top}",
              "split these over more mesh axes, use more devices, or raise the budget"))]


def _large_replicated(ir: PlanIR, assignments, nbytes, replicated, count: int | None,
                      sizes) -> list[Diagnostic]:
    # Under data_parallel replication is the declared strategy, not an oversight.
    if ir.distribution == "data_parallel" or (count is not None and count <= 1):
        return []
    groups: dict[str | None, list[Assignment]] = {}
    for a, n, r in zip(assignments, nbytes, replicated):
        if r and n >= LARGE_REPLICATED_BYTES:
            groups.setdefault((a.rule.where if a.rule else None), []).append(a)
    out = []
    on = f"all {count} devices" if count else "every device"
    for members in groups.values():
        members.sort(key=lambda a: -a.variable.nbytes)  # stable: ties in model order
        a = members[0]
        v = a.variable
        rule = a.rule
        if rule is not None:
            span, label = rule.span, "replicates it"
            why = f"{rule.label} lays it out `{rule.layout.text}`"
        else:
            span, label = ir.layout_span or ir.mesh.span, "no rule here splits it"
            why = "no rule matches it"
        message = (f"`{v.path}` {list(v.shape)} ({human_bytes(v.nbytes)}) is replicated on "
                   f"{on}: {why}")
        if len(members) > 1:
            others = [m.variable.path for m in members[1:]]
            shown = ", ".join(f"`{p}`" for p in others[:3]) + (" ..." if len(others) > 3 else "")
            message += f" (and {len(others)} more: {shown})"
        out.append(warning("P310", message, span, label=label, help=_split_help(v, ir, sizes),
                           variable=v.path, rule=rule.where if rule else None))
    return out


def _split_help(v: Variable, ir: PlanIR, sizes) -> str:
    base = (f"variables of {human_bytes(LARGE_REPLICATED_BYTES)} or more are worth "
            "splitting over a mesh axis")
    axes = sorted(((s, n) for n, s in sizes.items() if s and s > 1), key=lambda t: (-t[0], t[1]))
    batch = set(ir.batch_axes)
    # Prefer a model axis; a batch axis splits weights FSDP-style, which also works.
    axes.sort(key=lambda t: t[1] in batch)
    for size, name in axes:
        dims = sorted(range(v.rank), key=lambda k: -v.shape[k])
        for k in dims:
            if v.shape[k] % size == 0:
                entries = ["_"] * v.rank
                entries[k] = name
                return (f'{base}, e.g. `"{_escape(v.path)}" -> ({", ".join(entries)})`')
    return base


def _skipped(ir: PlanIR, assignments, memory: MemorySummary) -> list[Diagnostic]:
    auto = ir.mesh.auto_axis
    if auto is None:
        return []
    skipped = []
    if any(auto.name in a.layout.mesh_axes() for a in assignments):
        skipped.append(f"divisibility of the dimensions split over `{auto.name}`")
    if memory.per_device_bytes is None:
        skipped.append("the per-device memory" + (" and the `budget`" if ir.budget else ""))
    checks = [c for c in ir.checks if auto.name in c.names]
    if checks:
        skipped.append(f"{len(checks)} `check`{'s' if len(checks) > 1 else ''} reading "
                       f"`{auto.name}`")
    if not skipped:
        skipped.append("the ideal per-device memory and the replication overhead")
    return [note("P202", f"`{auto.name}` is `auto` and no device count was given: skipped "
                 + _and(skipped), auto.span, label="size unknown",
                 help="pass --devices N (or `devices=N` to `validate`) to check them")]


def _and(items: list[str]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]

"""`AotReport`: what `plan.aot` returns and `planc aot` renders (`planc.reports.aot`).

All figures are per device, in bytes. `to_dict()` is the JSON form, schema
`planc.aot/1`, and carries the same names as the object:

    {
      "schema": "planc.aot/1",
      "plan": "mlp", "file": "examples/aot.kd",
      "topology": "v5e:2x4", "platform": "tpu", "device_kind": "TPU v5 lite",
      "devices": 8, "slices": 1,
      "estimate": false,                # true for cpu:N: XLA:CPU's figures
      "mesh": {"fsdp": 4, "model": 2},
      "donate": true,
      "memory": {"argument": ..., "output": ..., "alias": ..., "temp": ...,
                 "generated_code": ..., "peak": ..., "host_argument": ...,
                 "host_output": ..., "host_alias": ..., "host_temp": ...},
      "budget": {"peak": 1073741824, "fits": true},   # null without budget(peak)
      "collectives": [{"kind": "all-gather", "axes": ["fsdp"], "count": 2,
                       "bytes": 33554432, "group_size": 4}, ...],
      "largest_arguments": {
        "by_variable": [{"path": "params/dense_0/kernel", "bytes": ...}, ...],
        "by_rule": [{"rule": "\"dense_0/kernel\" -> (fsdp, model) at examples/aot.kd:7",
                     "bytes": ...}, ...]},
      "compile_seconds": 9.3,
      "ok": true,
      "diagnostics": [...],             # planc.diagnostics/1 entries
      "summary": {"errors": 0, "warnings": 0, "notes": 0}
    }

`memory` is `memory_analysis()` of the compiled step, field for field, except on
`cpu:N`: XLA:CPU counts arguments in pinned host memory (layouts `on host`) with the
device's, so there their bytes are moved to the `host_*` figures; and its own peak
leaves temporaries out, so there `peak` is `argument + output - alias + temp`, an
estimate (`estimate` says so). The largest arguments are those in device memory.
"""

from __future__ import annotations

from planc.diagnostics import severity_counts
from planc.diagnostics.plan_error import Diagnosed

__all__ = ["AotReport", "Parameter", "Program", "SCHEMA", "TOP"]

SCHEMA = "planc.aot/1"
TOP = 8  # largest arguments listed, by variable and by rule


class Parameter:
    """A parameter as the step lays it out: `path`, global `shape`, `shard` (one device's
    shape), `spec` (mesh axes per dimension: None, a name or a tuple of names) and the
    `rule` label that laid it out."""

    __slots__ = ("path", "shape", "shard", "spec", "rule")

    def __init__(self, path, shape, shard, spec, rule):
        self.path = path
        self.shape = tuple(shape)
        self.shard = tuple(shard)
        self.spec = tuple(spec)
        self.rule = rule


class Program:
    """The compiled program as the cost model reads it: its optimized `hlo` text, the
    `mesh` it runs on, the mesh axes that span slices (`slice_axes`), the step's
    parameters as laid out (`parameters`, `Parameter`s), and JAX's `executable`, which
    runs when the devices are attached (`planc cost --calibrate` times it)."""

    __slots__ = ("hlo", "mesh", "slice_axes", "parameters", "executable")

    def __init__(self, hlo, mesh, slice_axes, parameters, executable=None):
        self.hlo = hlo
        self.mesh = mesh
        self.slice_axes = slice_axes
        self.parameters = parameters
        self.executable = executable


class StagePeak:
    """One pipeline position of a compiled step: its stages, the bytes planc's analytic
    model places there (the stages' parameters and optimizer state per device, as
    `planc explain` counts them), what the compile gives each device as arguments, and
    its peak; and `loop`, what `plan.pipeline`'s loop holds there by planc's analytic
    model (`planc.resolve.pipeline_memory.LoopMemory`, None where the step runs no
    `plan.pipeline`), and `schedule_activations`, the activations a runtime that runs the
    plan's schedule step by step (torch, Megatron) keeps there. Every position runs the
    one SPMD program, so the compiled figures are the same on each; the analytic ones say
    which position they bound."""

    __slots__ = ("position", "stages", "analytic_bytes", "argument_bytes", "peak", "loop",
                 "schedule_activations")

    def __init__(self, position, stages, analytic_bytes, argument_bytes, peak, loop=None,
                 schedule_activations=None):
        self.position, self.stages = position, stages
        self.analytic_bytes, self.argument_bytes, self.peak = (analytic_bytes,
                                                               argument_bytes, peak)
        self.loop, self.schedule_activations = loop, schedule_activations

    @property
    def analytic_peak(self) -> int | None:
        """The analytic model's peak of the position (`loop.peak`), or None."""
        return None if self.loop is None else self.loop.peak

    def to_dict(self) -> dict:
        return {"position": self.position, "stages": list(self.stages),
                "analytic_bytes": self.analytic_bytes, "argument_bytes": self.argument_bytes,
                "peak": self.peak, "analytic_peak": self.analytic_peak,
                "analytic_terms": None if self.loop is None else self.loop.to_dict(),
                "schedule_activation_bytes": self.schedule_activations}


class AotReport(Diagnosed):
    """The step compiled for a topology: XLA's per-device figures, the collectives, the
    largest arguments, and the diagnostics (the plan's warnings; P807 when the peak
    exceeds `budget(peak)`)."""

    __slots__ = ("plan", "file", "topology", "platform", "device_kind", "devices", "slices",
                 "estimate", "mesh", "donate", "memory", "collectives", "largest_variables",
                 "largest_rules", "compile_seconds", "budget_peak", "diagnostics", "sources",
                 "program", "stages")

    def __init__(self, *, plan, file, topology, platform, device_kind, devices, slices,
                 estimate, mesh, donate, memory, collectives, largest_variables,
                 largest_rules, compile_seconds, budget_peak, diagnostics, sources,
                 program=None, stages=None):
        self.plan = plan
        self.file = file
        self.topology = topology
        self.platform = platform
        self.device_kind = device_kind
        self.devices = devices
        self.slices = slices
        self.estimate = estimate
        self.mesh = mesh
        self.donate = donate
        self.memory = memory
        self.collectives = collectives
        self.largest_variables = largest_variables
        self.largest_rules = largest_rules
        self.compile_seconds = compile_seconds
        self.budget_peak = budget_peak
        self.diagnostics = diagnostics
        self.sources = sources
        # What the cost model reads of the same compile (`Program`); not in `to_dict`.
        self.program = program
        # Per pipeline position, with `stages`: `StagePeak`s (else None).
        self.stages = stages

    def __repr__(self):
        return (f"<AotReport {self.plan!r} on {self.topology}: peak {self.peak} bytes per "
                f"device{' (estimate)' if self.estimate else ''}>")

    @property
    def peak(self) -> int:
        return self.memory["peak"]

    @property
    def fits(self) -> bool | None:
        """Whether the peak fits `budget(peak)`; None without one."""
        return None if self.budget_peak is None else self.peak <= self.budget_peak

    def to_dict(self) -> dict:
        from planc.diagnostics.formats import diagnostic_dict

        return {
            "schema": SCHEMA,
            "plan": self.plan,
            "file": self.file,
            "topology": self.topology,
            "platform": self.platform,
            "device_kind": self.device_kind,
            "devices": self.devices,
            "slices": self.slices,
            "estimate": self.estimate,
            "mesh": dict(self.mesh),
            "donate": self.donate,
            "memory": dict(self.memory),
            "budget": (None if self.budget_peak is None
                       else {"peak": self.budget_peak, "fits": self.fits}),
            "collectives": [c.to_dict() for c in self.collectives],
            "largest_arguments": {
                "by_variable": [{"path": p, "bytes": b} for p, b in self.largest_variables],
                "by_rule": [{"rule": r, "bytes": b} for r, b in self.largest_rules]},
            "compile_seconds": round(self.compile_seconds, 3),
            **({"stages": [p.to_dict() for p in self.stages]} if self.stages is not None
               else {}),
            "ok": self.ok,
            "diagnostics": [diagnostic_dict(d) for d in self.diagnostics],
            "summary": severity_counts(self.diagnostics),
        }


def largest(leaves, top: int = TOP):
    """(by variable, by rule): the `top` largest `(path, bytes)` of `leaves` (`(path,
    bytes, label)` per argument leaf), and the `top` largest sums per label; ties in
    argument order."""
    by_variable = sorted(((p, b) for p, b, _ in leaves if b > 0),
                         key=lambda pb: -pb[1])[:top]
    sums: dict[str, int] = {}
    for _, b, label in leaves:
        sums[label] = sums.get(label, 0) + b
    by_rule = sorted(((l, b) for l, b in sums.items() if b > 0), key=lambda lb: -lb[1])[:top]
    return tuple(by_variable), tuple(by_rule)

"""The result of validating a plan against a model: `Report`, and its JSON form.

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
               # pattern null for `default`; the whole field null when no rule applied;
               # "own_names": true when the variable's own logical names decided
      "alternative": 0                    # which `|` alternative was taken; -1: none fit
      # Only where a dimension was laid out by a logical name (`axes`):
      "logical": ["embed", "mlp", null],  # per dimension: the logical name, or null
      # Only for a plan with `state` rules or `on host` layouts (the memory is itemised):
      "memory": "device" | "host",        # where the variable is placed
      "state": {"axes": [...], "partition_spec": [...], "blocks": [...],
                "memory": "device" | "host",
                "shard_shape": [...] | null, "bytes_per_device": int | null,
                "rule": {"file", "line", "pattern"} | null},   # null: mirrors the variable
      "device_bytes": int | null,         # the variable and its K - 1 slots, per device,
      "host_bytes": int | null            # in device memory and in host memory
    }

    MEMORY = {
      "variables": 164, "total_bytes": ..., "devices": 8,
      "per_device_bytes": ...,            # the most loaded device; null if unknown
      "ideal_bytes": ...,                 # total / devices; null if unknown
      "overhead": 1.02,                   # per_device / ideal; null if unknown
      "state": 1, "budget_bytes": null,   # from `budget(per_device = ..., state = ...)`
      "largest_replicated": [{"path": ..., "bytes": ...}, ...],   # at most 5
      "largest_per_device": [{"path": ..., "bytes_per_device": ...}, ...]   # at most 5
      # Only for a plan with `state` rules or `on host` layouts, slots counted (K - 1 of
      # them, K from `budget(state = K)`) at their own layouts:
      "device_bytes": ..., "host_bytes": ...,   # per device; null if unknown
      "host_budget_bytes": null,                # from `budget(host = ...)`
      "largest_device": [...], "largest_host": [...]   # as largest_per_device
    }
"""

from __future__ import annotations


from planc.diagnostics import Diagnostic, severity_counts
from planc.diagnostics.plan_error import Diagnosed
from planc.diagnostics.text import counted
from planc.frozen import Frozen
from planc.ir import PlanIR
from planc.resolve.memory import ItemisedBytes, MemorySummary, human_bytes
from planc.resolve.resolution import Assignment, ResolvedLayout

# `sources` left out: each report its own new dict, as a dataclass's default_factory made.
_NO_SOURCES = object()


class Report(Frozen, Diagnosed):
    """The result of `validate`: diagnostics, each variable's layout, and memory.

    `diagnostics` are sorted by `Diagnostic.sort_key` and hold what validation against
    the model found (the plan's own warnings stay in `plan.diagnostics`). `assignments`
    follow the model's order; `shard_shapes` and `bytes_per_device` run parallel to them.
    For a plan with `state` rules or `on host` layouts, `slots` (parallel too) is each
    variable's optimizer slots: the assignment of its `state` rule, or its own where its
    slots mirror it; and `kinds` their bytes by memory. They are empty and None otherwise.
    """

    plan_name: str
    file: str
    diagnostics: tuple[Diagnostic, ...]
    assignments: tuple[Assignment, ...]
    devices: int | None
    mesh: dict
    memory: MemorySummary
    shard_shapes: tuple[tuple[int, ...] | None, ...] = ()
    bytes_per_device: tuple[int | None, ...] = ()
    sources: dict = _NO_SOURCES
    ir: PlanIR | None = None  # the plan as validated
    slots: tuple[Assignment, ...] = ()
    kinds: ItemisedBytes | None = None
    stages: object = None  # a `planc.resolve.stages.StagePlan` when the plan has `stages`
    _not_compared = ("sources", "ir")
    _not_shown = ("shard_shapes", "bytes_per_device", "sources", "ir", "slots", "kinds")

    def __post_init__(self):
        if self.sources is _NO_SOURCES:
            self.sources = {}

    @property
    def layouts(self) -> dict[str, ResolvedLayout]:
        """`{path: layout}` in model order."""
        return {a.variable.path: a.layout for a in self.assignments}

    @property
    def state_layouts(self) -> dict[str, ResolvedLayout]:
        """`{path: layout}` of each parameter's optimizer slots, in model order: its
        `state` rule's layout, or its own where no state rule matches it."""
        slots = self.slots or self.assignments
        return {a.variable.path: s.layout for a, s in zip(self.assignments, slots)}

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
            where = (("on the one device" if n == 1 else f"on each of {n} devices") if n
                     else "per device")
            lines.append(("per device", f"{human_bytes(m.per_device_bytes)} {where} "
                                        "(the most loaded)"))
        if m.ideal_bytes is not None:
            lines.append(("ideal", f"{human_bytes(m.ideal_bytes)} (total / {n})"))
        if m.overhead is not None:
            lines.append(("overhead", f"{m.overhead:.2f}x the ideal: what is not split over "
                                      "every device is held more than once"))
        if m.itemised:
            lines += _itemised_lines(m)
        elif m.budget_bytes is not None and m.per_device_bytes is not None:
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
        head = f"plan {self.plan_name}" + (f" on {counted(self.devices, 'device')}"
                                           if self.devices else "")
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
        rows = [variable_dict(a, s, b, cache) for a, s, b in
                zip(self.assignments, self.shard_shapes, self.bytes_per_device)]
        if self.slots:
            sizes = dict(self.mesh)
            kinds = self.kinds
            for row, a, slot, one, device, host in zip(rows, self.assignments, self.slots,
                                                        kinds.slot, kinds.device, kinds.host):
                row.update(memory_dict(a, slot, one, device, host, sizes))
        return rows

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
            **({"stages": self.stages.to_dict()} if self.stages is not None else {}),
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
        logical = None
        if a.rule is not None:
            span = a.rule.span
            rule = {"file": span.file if span else None,
                    "line": span.line if span else None, "pattern": a.rule.pattern}
            if a.rule.is_own_names:
                rule["own_names"] = True
            logical = logical_names(a)
        common = cache[key] = (axes_json(a.layout.axes), list(a.layout.blocks),
                               a.layout.is_replicated, rule, logical)
    axes, blocks, replicated, rule, logical = common
    row = {
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
    if logical is not None:
        row["logical"] = list(logical)
    return row


def logical_names(a: Assignment) -> tuple | None:
    """The logical name each dimension of `a`'s variable was laid out by (None for a
    dimension without one), or None when no dimension has one: the layout's rule writes
    none and the variable's own names did not decide."""
    alts = a.rule.layout.alternatives
    if a.alternative < 0 or a.alternative >= len(alts):
        return None
    dims = alts[a.alternative].expand(len(a.variable.shape))
    if dims is None or not any(d.written for d in dims):
        return None
    out = []
    for d in dims:
        names = d.logical
        out.append(None if not names else names[0] if len(names) == 1 else "+".join(names))
    return tuple(out) if any(n is not None for n in out) else None


def memory_dict(a: Assignment, slot: Assignment, slot_bytes: int | None, device: int | None,
                host: int | None, sizes: dict) -> dict:
    """The keys an itemised plan adds to a `VARIABLE` object: where the variable is, its
    slots' layout, and its bytes (with its slots') by memory."""
    shard = slot.layout.shard_shape(a.variable.shape, sizes)
    rule = None
    if slot is not a and slot.rule is not None:
        span = slot.rule.span
        rule = {"file": span.file if span else None, "line": span.line if span else None,
                "pattern": slot.rule.pattern}
    axes = axes_json(slot.layout.axes)
    return {
        "memory": _memory(a.layout),
        "state": {"axes": axes, "partition_spec": list(axes), "blocks": list(slot.layout.blocks),
                  "memory": _memory(slot.layout),
                  "shard_shape": None if shard is None else list(shard),
                  "bytes_per_device": slot_bytes, "rule": rule},
        "device_bytes": device,
        "host_bytes": host,
    }


def _memory(layout: ResolvedLayout) -> str:
    return "host" if layout.host else "device"


def _itemised_lines(m: MemorySummary) -> list[tuple[str, str]]:
    """The summary lines of an itemised plan: device and host memory, each against its
    budget, the K - 1 optimizer slots included."""
    slots = (f", with {m.state - 1} optimizer slot{'s' if m.state != 2 else ''} per "
             "parameter" if m.state > 1 else "")
    lines = []
    for label, need, limit in (("device memory", m.device_bytes, m.budget_bytes),
                               ("host memory", m.host_bytes, m.host_budget_bytes)):
        if need is None:
            lines.append((label, "unknown: an `auto` axis has no size (pass --devices)"))
            continue
        text = f"{human_bytes(need)} per device{slots}"
        if limit is not None:
            verdict = "fits" if need <= limit else "OVER BUDGET"
            text += f": {verdict} in {human_bytes(limit)}"
        lines.append((label, text))
    return lines

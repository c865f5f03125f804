"""The Plan IR: what a checked plan means, frozen and backend-agnostic.

The checker builds it from the AST; the resolver, the backends and the reports only read
it. Nothing here imports jax or keras.

IR objects are `planc.frozen.Frozen` records: each declares its fields in order, and is
built from them by position or by name. Where a thing stands (its spans) and what only
describes the plan (its sources, its warnings) are left out of `==` and `hash`
(`_not_compared`), so two plans that mean the same compare equal.
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, Span
from planc.frozen import Frozen

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

AxisEntry = None | str | tuple  # None, "model", or ("data", "model")


class MeshAxis(Frozen):
    """A mesh axis: `size` devices per slice (None while `auto`), times `slices` slices."""

    name: str
    size: int | None
    span: Span | None = None
    slices: int = 1
    _not_compared = ("span",)

    @property
    def global_size(self) -> int | None:
        return None if self.size is None else self.size * self.slices


class Mesh(Frozen):
    """The mesh's axes in order; `span` is None for the implied `mesh(batch = auto)` of
    data_parallel, `slices_span` None without a `slices` statement."""

    axes: tuple[MeshAxis, ...]
    span: Span | None = None
    slices_span: Span | None = None
    _not_compared = ("span", "slices_span")
    __slots__ = ("_names",)  # `names`, made once from `axes`

    def __post_init__(self):
        self._names = tuple(a.name for a in self.axes)

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def shape(self) -> tuple[int | None, ...]:
        """Global axis sizes in mesh order (None for an unresolved `auto`)."""
        return tuple(a.global_size for a in self.axes)

    @property
    def slice_shape(self) -> tuple[int, ...]:
        return tuple(a.slices for a in self.axes)

    @property
    def auto_axis(self) -> MeshAxis | None:
        return next((a for a in self.axes if a.size is None), None)

    @property
    def device_count(self) -> int | None:
        n = 1
        for s in self.shape:
            if s is None:
                return None
            n *= s
        return n

    def size_of(self, name: str) -> int | None:
        for a in self.axes:
            if a.name == name:
                return a.global_size
        raise KeyError(name)


class Dim(Frozen):
    """One layout entry: split over `axes` (major to minor) in blocks of `block`; `()` = not split.

    `written` is the entry as the plan writes it where it names logical axes (`embed`),
    which the `axes` table turned into `axes`; `()` where it names mesh axes only. It
    says how the plan put it, not what it means, so it is left out of `==`.
    """

    axes: tuple[str, ...] = ()
    block: int = 1
    span: Span | None = None
    written: tuple[str, ...] = ()
    _not_compared = ("span", "written")

    @property
    def logical(self) -> tuple[str, ...]:
        """The logical names this entry was written with, in order (`()`: none)."""
        return tuple(n for n in self.written if n not in self.axes) if self.written else ()

    @property
    def entry(self) -> AxisEntry:
        """The Keras/JAX form: None, an axis name, or a tuple of axis names."""
        if not self.axes:
            return None
        return self.axes[0] if len(self.axes) == 1 else self.axes

    @staticmethod
    def of(entry, block: int = 1) -> Dim:
        """The dim of a Keras/JAX-form entry: None, an axis name, or a sequence of names
        (a JSON list too); a dim that is not split has no block."""
        if entry is None:
            return UNSPLIT
        return Dim((entry,) if isinstance(entry, str) else tuple(entry), block)


UNSPLIT = Dim()


class Alternative(Frozen):
    """One layout form: `head`, then (if `ellipsis`) any number of `_`, then `tail`."""

    head: tuple[Dim, ...]
    ellipsis: bool = False
    tail: tuple[Dim, ...] = ()
    replicated: bool = False
    span: Span | None = None
    _not_compared = ("span",)

    def expand(self, rank: int) -> tuple[Dim, ...] | None:
        """The dims for a variable of `rank`, or None when the rank cannot fit."""
        if self.replicated:
            return (UNSPLIT,) * rank
        fixed = len(self.head) + len(self.tail)
        if self.ellipsis:
            if rank < fixed:
                return None
            return self.head + (UNSPLIT,) * (rank - fixed) + self.tail
        return self.head if rank == fixed else None

    @property
    def rank_text(self) -> str:
        fixed = len(self.head) + len(self.tail)
        if self.replicated:
            return "any rank"
        return f"rank >= {fixed}" if self.ellipsis else f"rank {fixed}"


class Layout(Frozen):
    """A rule's layout: its alternatives, and `text`, their canonical source form (for
    messages and reports). `host` when it is written `... on host`: placed in pinned host
    memory (`memory_kind="pinned_host"`); `host_span` is where `on host` stands."""

    alternatives: tuple[Alternative, ...]
    text: str
    span: Span | None = None
    host: bool = False
    host_span: Span | None = None
    _not_compared = ("span", "host_span")


class Rule(Frozen):
    """`"pattern" -> layout` (or `default -> layout` when `pattern` is None).

    `index` is the rule's position in file order within its block; `raw` the pattern as
    written between the quotes. `names` is set on the rules the resolver makes from a
    variable's own logical names (no pattern; a negative `index`): those names, read
    through the `axes` table.
    """

    index: int
    pattern: str | None
    layout: Layout
    span: Span | None = None
    pattern_span: Span | None = None
    raw: str | None = None
    names: tuple[str | None, ...] | None = None
    _not_compared = ("span", "pattern_span")

    @property
    def is_default(self) -> bool:
        return self.pattern is None and self.names is None

    @property
    def is_own_names(self) -> bool:
        return self.names is not None

    @property
    def where(self) -> str:
        return f"{self.span.file}:{self.span.line}" if self.span else "<plan>"

    @property
    def label(self) -> str:
        if self.names is not None:
            return "its own logical names " + self.layout.text
        return "default" if self.pattern is None else f'"{self.raw if self.raw is not None else self.pattern}"'


class Rename(Frozen):
    r"""`"pattern" -> "template" [transpose]` of a `rename` block: checkpoint name -> path.

    `pattern` fullmatches a checkpoint tensor name; the first rule in file order that
    matches wins, and `template` (``, `\g<name>`, `\g<0>`, `\`) expands to the
    variable path (`planc.checkpoints.renaming`). `transpose` reads a 2-D tensor as its
    transpose (PyTorch `[out, in]` -> JAX `[in, out]`).
    """

    index: int  # position in file order, across every `rename` block
    pattern: str
    template: str
    transpose: bool = False
    span: Span | None = None
    pattern_span: Span | None = None
    _not_compared = ("span", "pattern_span")

    @property
    def where(self) -> str:
        return f"{self.span.file}:{self.span.line}" if self.span else "<plan>"

    @property
    def text(self) -> str:
        """The rule as a plan writes it (the strings' values, `\"` unescaped)."""
        return f'"{self.pattern}" -> "{self.template}"' + (" transpose" if self.transpose else "")


class LogicalAxis(Frozen):
    """One entry of the `axes` table: the logical dimension `name` maps to the mesh `axes`
    (major to minor; `()`: not split)."""

    name: str
    axes: tuple[str, ...] = ()
    span: Span | None = None
    _not_compared = ("span",)

    @property
    def text(self) -> str:
        """The entry as a plan writes it: `embed -> fsdp`, `kv -> _`."""
        return f"{self.name} -> {_dim_text(Dim(self.axes))}"


def assign_logical(table: Sequence[LogicalAxis], names: Sequence[str | None],
                   taken=()) -> tuple[tuple[str, ...] | None, ...]:
    """The mesh axes each of `names` (logical names, None for a dimension without one)
    takes under `table`, as `flax.linen.logical_to_mesh_axes` assigns them.

    The entries are read in table order; an entry applies to the dimension its name
    stands at when that dimension has no axes yet and none of the entry's axes is taken
    in this array, neither by an earlier entry nor as one of the mesh axes `taken` (those
    written as themselves in the layout). A dimension no entry applies to gets None: its
    name has no entry, or every entry's axes were taken (Flax leaves it unsplit).

    >>> t = (LogicalAxis("embed", ("fsdp",)), LogicalAxis("mlp", ("fsdp",)),
    ...      LogicalAxis("mlp", ("tp",)))
    >>> assign_logical(t, ("embed", "mlp")), assign_logical(t, ("mlp", None, "heads"))
    ((('fsdp',), ('tp',)), (('fsdp',), None, None))
    """
    out: list = [None] * len(names)
    at: dict[str, int] = {}
    for i, name in enumerate(names):
        if name is not None:
            at.setdefault(name, i)
    used = set(taken)
    for entry in table:
        i = at.get(entry.name)
        if i is None or out[i] is not None or not used.isdisjoint(entry.axes):
            continue
        out[i] = entry.axes
        used.update(entry.axes)
    return tuple(out)


class StageRule(Frozen):
    r"""`"pattern" -> STAGE` of a `stages` block. `stage` is `("first",)`, `("last",)` or
    an integer expression encoded as `planc.check.expression` encodes a `check`, where
    `("group", N)` is the pattern's group N read as an integer and `/` divides to the
    floor; `names` are the params and axis sizes it reads."""

    index: int
    pattern: str
    stage: tuple
    names: tuple[str, ...] = ()
    span: Span | None = None
    pattern_span: Span | None = None
    raw: str | None = None
    _not_compared = ("span", "pattern_span")

    @property
    def label(self) -> str:
        return f'"{self.raw if self.raw is not None else self.pattern}"'


class Stages(Frozen):
    """`stages(AXIS, microbatches = N, schedule = S) { RULES }`: pipeline stages over mesh
    axis `axis`. `schedule` is "gpipe", "1f1b", or "interleaved" or "looped_bfs" (with
    `virtual` stages per position); there are size(axis) x `virtual` stages, stage k on
    position k % size."""

    axis: str
    microbatches: int
    schedule: str = "1f1b"
    virtual: int = 1
    rules: tuple[StageRule, ...] = ()
    span: Span | None = None
    _not_compared = ("span",)

    def count(self, mesh: Mesh) -> int | None:
        """The number of stages (None while the axis is `auto`)."""
        size = mesh.size_of(self.axis)
        return None if size is None else size * self.virtual

    @property
    def torch_schedule(self) -> str:
        """The schedule's name as torch's `get_schedule_class` and torchtitan's
        `pipeline_parallel_schedule` take it."""
        return {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B",
                "looped_bfs": "LoopedBFS"}[self.schedule]

    @property
    def schedule_text(self) -> str:
        if self.schedule in ("interleaved", "looped_bfs"):
            return f"{self.schedule}({self.virtual})"
        return self.schedule


class Budget(Frozen):
    """`budget(per_device = SIZE, host = SIZE, state = K, peak = SIZE, step = DURATION,
    imbalance = PERCENT)`, sizes in bytes, None where not given (at least one is).
    `per_device` bounds the variables' device bytes (times `state`), `host` their
    pinned-host bytes, `peak` the compiled step's per-device peak (`planc aot`), `step`
    the predicted step time in seconds (`planc cost`), `imbalance` (a fraction) the
    largest pipeline stage over the mean, in time and in bytes. `host_span` is where
    `host = SIZE` stands, `imbalance_span` where `imbalance = ...` does."""

    per_device: int | None
    state: int = 1
    span: Span | None = None
    peak: int | None = None
    host: int | None = None
    host_span: Span | None = None
    step: float | None = None
    imbalance: float | None = None
    imbalance_span: Span | None = None
    _not_compared = ("span", "host_span", "imbalance_span")


class Check(Frozen):
    """`check expr, "message"`; `expr` is the name-checked expression, encoded as
    `planc.check.expression` says (nested tuples, no spans: plans compare by meaning);
    `names` are the axis and param names it reads."""

    expr: tuple
    message: str
    names: tuple[str, ...]
    span: Span | None = None
    _not_compared = ("span",)


class Setting(Frozen):
    """A cluster value: a literal, or `env("NAME", default)` read when the cluster starts."""

    value: int | str | None
    env: str | None = None
    span: Span | None = None
    _not_compared = ("span",)

    def read(self, environ) -> int | str | None:
        if self.env is not None and self.env in environ:
            raw = environ[self.env]
            if isinstance(self.value, int):
                return int(raw)
            return raw
        return self.value


class Cluster(Frozen):
    """`cluster { ... }`. `detect` is how JAX finds the rest: "auto" (`cluster auto`: every
    environment JAX knows), one environment by name ("slurm", "ompi", ...), or "none"
    (only the values given)."""

    coordinator: Setting | None = None
    processes: Setting | None = None
    process_id: Setting | None = None
    span: Span | None = None
    detect: str = "auto"
    _not_compared = ("span",)


class PlanIR(Frozen):
    """A checked plan. `auto` stays None in the mesh until a device count is known.

    `distribution` is "data_parallel" or "model_parallel"; `match` "full" or "search";
    `overlap` "error" or "first". `renames` are the `rename` blocks' rules in file order.
    `state` and `state_default` are the `state` blocks' rules: the layouts of the optimizer
    slots of the parameters they match (`state_span`: where the first block starts).
    `axis_types` is "auto" or "explicit" per mesh axis, in mesh order, and () when every
    axis is `auto` (the default), so plans without the statement keep their fingerprints.
    `layout_span` is where the first `layout` block starts (what an unmatched variable
    points at); `rename_span` where the first `rename` block starts (what a checkpoint
    problem with no rule points at). `model` is the model source of `model "PATH"`,
    resolved against the directory of the file that says it (None without the
    statement); it is not part of the layout, so it leaves the fingerprint alone.
    `sources` are the source texts by file name, so diagnostics can be rendered later;
    `diagnostics` the warnings and notes found while checking (errors raise instead).
    `stages` is the pipeline's `stages` statement (None without one).
    `logical_axes` is the `axes` table in file order (`logical_span`: where the first
    `axes` block starts); `assign_logical` reads it.
    `written_mesh` is the mesh as the plan writes it once `mesh` has `auto` resolved for a
    device count (None while `mesh` is as written): the plan's fingerprint, its identity,
    is taken over it, so binding a device count leaves the fingerprint alone.
    """

    name: str
    file: str
    params: tuple[tuple[str, int | str], ...]
    mesh: Mesh
    distribution: str
    batch_axes: tuple[str, ...]
    match: str = "full"
    overlap: str = "error"
    rules: tuple[Rule, ...] = ()
    default: Rule | None = None
    outputs: tuple[Rule, ...] = ()
    outputs_default: Rule | None = None
    renames: tuple[Rename, ...] = ()
    budget: Budget | None = None
    checks: tuple[Check, ...] = ()
    cluster: Cluster | None = None
    axis_types: tuple[str, ...] = ()
    axis_types_span: Span | None = None
    layout_span: Span | None = None
    rename_span: Span | None = None
    model: str | None = None
    model_span: Span | None = None
    state: tuple[Rule, ...] = ()
    state_default: Rule | None = None
    state_span: Span | None = None
    sources: tuple[tuple[str, str], ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    written_mesh: Mesh | None = None
    logical_axes: tuple[LogicalAxis, ...] = ()
    logical_span: Span | None = None
    stages: Stages | None = None
    _not_compared = ("logical_span", "axis_types_span", "layout_span", "rename_span", "model", "model_span",
                     "state_span", "sources", "diagnostics", "written_mesh")
    _not_shown = ("sources", "diagnostics")

    @property
    def param_dict(self) -> dict[str, int | str]:
        return dict(self.params)

    @property
    def source_dict(self) -> dict[str, str]:
        return dict(self.sources)

    @property
    def anchor(self) -> Span:
        """Where a finding about the plan as a whole points: its `mesh` statement, or its
        file's first line when no mesh was written (`data_parallel`'s default mesh)."""
        return self.mesh.span or Span.start_of(self.file)

    @property
    def mesh_axis_types(self) -> tuple[str, ...]:
        """"auto" or "explicit" for each mesh axis, in mesh order."""
        return self.axis_types or ("auto",) * len(self.mesh.axes)

    @property
    def explicit_axes(self) -> tuple[str, ...]:
        """The mesh axes whose type is `explicit`, in mesh order."""
        return tuple(n for n, t in zip(self.mesh.names, self.mesh_axis_types) if t == "explicit")

    @property
    def has_slices(self) -> bool:
        return any(a.slices > 1 for a in self.mesh.axes)

    @property
    def has_state_rules(self) -> bool:
        """Whether a `state` block lays out optimizer slots (else they mirror the parameters)."""
        return bool(self.state) or self.state_default is not None

    def host_rules(self, outputs: bool = True) -> tuple[Rule, ...]:
        """The rules, of every block, whose layout is `on host`, in block order (`layout`,
        `state`, `outputs`), each block's default last; with `outputs=False`, only those
        placing variables and optimizer slots (not the activations of `outputs`)."""
        return tuple(r for r in _with_defaults(self, outputs) if r.layout.host)

    @property
    def itemised_memory(self) -> bool:
        """Whether the memory model counts device and host bytes apart, and the slots at
        their own layouts: the plan lays out optimizer slots itself, or places variables
        or slots in host memory. Otherwise its figures are those plans always had."""
        return self.has_state_rules or bool(self.host_rules(outputs=False))


def _with_defaults(ir: PlanIR, outputs: bool = True):
    blocks = ((ir.rules, ir.default), (ir.state, ir.state_default))
    for rules, default in blocks + (((ir.outputs, ir.outputs_default),) if outputs else ()):
        yield from rules
        if default is not None:
            yield default


def layout_text(layout: Alternative | Sequence[Dim], *, replicated_word: bool = False) -> str:
    """A layout as a plan writes it: `(model, _)`, `((data, fsdp)[128], ...)`, `replicated`.

    The one writer of layout text. An `Alternative` is written in its source form (with
    `...`, or `replicated`); a sequence of dims, such as a resolved layout, entry by entry,
    where `replicated_word` writes an all-`_` layout of rank >= 1 as `replicated`.

    >>> layout_text((Dim(("model",)), UNSPLIT)), layout_text((UNSPLIT,), replicated_word=True)
    ('(model, _)', 'replicated')
    """
    if isinstance(layout, Alternative):
        if layout.replicated:
            return "replicated"
        parts = list(map(_dim_text, layout.head))
        if layout.ellipsis:
            parts.append("...")
            parts += map(_dim_text, layout.tail)
    else:
        if replicated_word and layout and not any(d.axes for d in layout):
            return "replicated"
        parts = [_dim_text(d) for d in layout]
    return "(" + ", ".join(parts) + ")"


def named_layout_text(dims: Sequence[Dim], names: Sequence[str | None]) -> str:
    """A resolved layout with each dimension's logical name beside its mesh axes, as the
    reports show it (`planc explain`, the HTML page, the editor's hover).

    >>> named_layout_text((Dim(("fsdp",)), UNSPLIT, Dim(("tp",))), ("embed", None, "mlp"))
    '(embed:fsdp, _, mlp:tp)'
    """
    parts = [_dim_text(Dim(d.axes, d.block)) for d in dims]
    return "(" + ", ".join(p if n is None else f"{n}:{p}" for n, p in zip(names, parts)) + ")"


def _dim_text(d: Dim) -> str:
    axes = d.written or d.axes
    if len(axes) == 1 and d.block == 1:  # most dims
        return axes[0]
    if not axes:
        return "_"
    body = axes[0] if len(axes) == 1 else "(" + ", ".join(axes) + ")"
    return body + (f"[{d.block}]" if d.block != 1 else "")

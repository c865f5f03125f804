"""`Plan`: the public face of a checked plan.

A `Plan` wraps the frozen `PlanIR` and routes each request to the stage that answers it:
the resolver for validation, `planc.targets.jax.sharding` for JAX shardings,
`planc.targets.keras.distribution` for Keras distribution objects,
`planc.targets.torch.distribute` for DTensors. Those are imported on first use, so
`import planc` stays free of jax, keras and torch.
"""

from __future__ import annotations

import os
from operator import attrgetter, itemgetter

from planc.check.binding import bind_devices
from planc.check.checker import check, check_file
from planc.ir import PlanIR
from planc.variables import path_of

# Fields of an assignment (a named tuple: variable, layout, ...), read at C speed when a
# large model's layouts are collected.
_VARIABLE, _LAYOUT = itemgetter(0), itemgetter(1)


def _ir_field(path: str, doc: str | None = None) -> property:
    """A read-only property of a `Plan` that is its IR's `path` (`"mesh.names"`)."""
    return property(attrgetter("_ir." + path), doc=doc)


class Plan:
    """A checked sharding plan. Build one with `planc.load_plan` or `planc.loads`.

    >>> import planc
    >>> plan = planc.loads('''
    ... mesh(batch = auto, model = 2)
    ... model_parallel(batch = batch)
    ... layout { "dense/kernel" -> (_, model) }
    ... ''')
    >>> plan.axis_names, plan.mesh_shape
    (('batch', 'model'), (None, 2))
    >>> plan.with_devices(8).mesh_shape
    (4, 2)
    """

    __slots__ = ("_ir", "_keras")

    def __init__(self, ir: PlanIR):
        object.__setattr__(self, "_ir", ir)
        # The DeviceMesh and LayoutMap, built once: Keras code expects
        # `plan.layout_map.device_mesh is plan.device_mesh`, as for its own objects.
        object.__setattr__(self, "_keras", {})

    def __setattr__(self, name, value):
        raise AttributeError("a Plan is frozen")

    def __eq__(self, other):
        return isinstance(other, Plan) and self._ir == other._ir

    def __hash__(self):
        return hash(self._ir)

    def __repr__(self):
        shape = ", ".join(f"{a.name}={'auto' if a.size is None else a.global_size}"
                          for a in self._ir.mesh.axes)
        return (f"<Plan {self._ir.name!r} mesh({shape}) {self._ir.distribution} "
                f"rules={len(self._ir.rules)}>")

    # -- what the plan says ------------------------------------------------------------------

    @property
    def ir(self) -> PlanIR:
        """The frozen IR that every backend reads."""
        return self._ir

    name = _ir_field("name")

    @property
    def fingerprint(self) -> str:
        """The plan's identity: SHA-256 (hex) of its meaning as written, `auto`
        unresolved; the same for `plan.with_devices(n)` and wherever the file lives, and
        what `planc compile` and `plan.save` write (`planc.targets.emit.compiled_json`)."""
        from planc.fingerprint import fingerprint

        return fingerprint(self._ir)

    file = _ir_field("file")
    params = _ir_field("param_dict")
    axis_names = _ir_field("mesh.names")
    mesh_shape = _ir_field("mesh.shape", "Global axis sizes in mesh order; None marks an "
                                         "unresolved `auto`.")

    @property
    def mesh_axes(self) -> dict[str, int | None]:
        return dict(zip(self.axis_names, self.mesh_shape))

    device_count = _ir_field("mesh.device_count")
    distribution_kind = _ir_field("distribution", '`"data_parallel"` or `"model_parallel"`.')
    batch_axes = _ir_field("batch_axes")

    @property
    def microbatches(self) -> int | None:
        """The `stages` block's microbatches (MaxText's `num_pipeline_microbatches`), None
        for a plan without stages: what a step builder taking `plan` splits its batch into
        before `plan.pipeline`.

        >>> import planc
        >>> planc.loads("mesh(pipe = 2, data = 4)\\nmodel_parallel(batch = data)\\n"
        ...             "stages(pipe, microbatches = 8) {}").microbatches
        8
        """
        return self._ir.stages.microbatches if self._ir.stages is not None else None

    match = _ir_field("match")
    overlap = _ir_field("overlap")
    rules = _ir_field("rules")
    default = _ir_field("default")
    output_rules = _ir_field("outputs")
    diagnostics = _ir_field("diagnostics", "Warnings and notes found while checking the plan "
                                           "(errors raise instead).")

    def with_devices(self, devices: int) -> "Plan":
        """This plan on `devices` devices: `auto` resolved, every `check` evaluated.

        Raises `PlanError` (P201) when the count does not fit the mesh.
        """
        return Plan(bind_devices(self._ir, devices))

    # -- validation (planc.resolve) ---------------------------------------------------------

    def validate(self, model, devices: int | None = None, *, progress: bool = False):
        """Check the plan against a model's variables; returns a `planc.resolve.Report`.

        `model` is a Keras model, a pytree, a checkpoint or manifest path, `module:attr`,
        or a sequence of `planc.Variable`. `progress` draws a bar on a terminal.
        """
        from planc.resolve import validate

        return validate(self._ir, model, devices, progress=progress)

    def resolve(self, model, devices: int | None = None):
        """`{path: ResolvedLayout}` for every variable of `model`, in the model's order: each
        a `planc.resolve.ResolvedLayout` (its `axes`, one entry per dimension: None, an
        axis name or a tuple of them; `host` for a layout `on host`). Raises `PlanError`
        with every diagnostic when the plan has errors against `model`.

        >>> import planc
        >>> plan = planc.loads('mesh(data = 2, model = 4)  model_parallel(batch = data)'
        ...                    '  layout { "w" -> (_, model)  default -> replicated }')
        >>> plan.resolve([planc.Variable("w", (16, 32), "float32")])["w"].axes
        (None, 'model')
        """
        from planc.resolve import resolved

        assignments = resolved(self._ir, model, devices)
        return dict(zip(map(path_of, map(_VARIABLE, assignments)), map(_LAYOUT, assignments)))

    # -- JAX (planc.targets.jax.sharding) -----------------------------------------------------

    def _jax(self):
        from planc.targets.jax import sharding as backend

        return backend

    def mesh(self, devices=None):
        """A `jax.sharding.Mesh` over `devices` (default: `jax.devices()`)."""
        return self._jax().make_mesh(self._ir, devices)

    def partition_spec(self, path: str, shape):
        return self._jax().partition_spec(self._ir, path, tuple(shape))

    def shardings(self, tree, mesh=None, *, params=None):
        """A pytree of `NamedSharding`, one per leaf of `tree`; with `params=`, `tree` is
        their optimizer state, each leaf laid out as its parameter's slots (the `state`
        rules, else the parameter's own layout). Layouts `on host` are in pinned host
        memory (`memory_kind="pinned_host"`). A tree of dicts, lists and tuples is walked
        once and its dicts keep their key order; a tree with other nodes is rebuilt by
        JAX, whose dicts come in sorted order, as from `jax.tree.map` (equal either way).

        >>> import jax, planc
        >>> plan = planc.loads('mesh(data = auto)\\ndata_parallel')
        >>> plan.shardings({"w": jax.ShapeDtypeStruct((4, 4), "float32")})["w"].spec
        P(None, None)
        """
        return self._jax().shardings(self._ir, tree, mesh=mesh, params=params)

    def shard(self, tree, mesh=None, *, params=None):
        """`tree` placed as `shardings(tree, mesh, params=params)` says (`jax.device_put`)."""
        return self._jax().shard(self._ir, tree, mesh=mesh, params=params)

    def init(self, fn, *args, mesh=None, **kwargs):
        return self._jax().init(self._ir, fn, *args, mesh=mesh, **kwargs)

    def data_sharding(self, rank: int = 2, mesh=None):
        return self._jax().data_sharding(self._ir, rank, mesh=mesh)

    def shard_batch(self, batch, mesh=None):
        return self._jax().shard_batch(self._ir, batch, mesh=mesh)

    def output_sharding(self, path: str, rank: int, mesh=None):
        return self._jax().output_sharding(self._ir, path, rank, mesh=mesh)

    # -- explicit sharding and activations (planc.targets.jax.activations) --------------------

    @property
    def axis_types(self) -> dict[str, str]:
        """Each mesh axis's type, `"auto"` or `"explicit"` (the `axis_types` statement).

        >>> import planc
        >>> planc.loads("mesh(data = 2, model = 4)\\nmodel_parallel(batch = data)\\n"
        ...             "axis_types(data = explicit)").axis_types
        {'data': 'explicit', 'model': 'auto'}
        """
        return dict(zip(self.axis_names, self._ir.mesh_axis_types))

    def _activations(self):
        from planc.targets.jax import activations as jax_activations
        return jax_activations

    def use(self, mesh=None, *, devices=None):
        """`jax.set_mesh(plan.mesh(devices))`: a setter, and a context manager
        (`with plan.use(): ...`). Explicit axes need a current mesh inside `jit`."""
        return self._activations().use(self._ir, mesh, devices)

    def constrain(self, x, name: str, mesh=None):
        """`x` laid out by the `outputs` rule for `name`, inside or outside `jit`
        (`reshard` on explicit axes, `with_sharding_constraint` on auto ones). A shape the
        rule does not fit is a `PlanError` (P317) at the rule's line; no rule is a P318 note
        (a `ConstraintNote` warning) and `x` unchanged."""
        return self._activations().constrain(self._ir, x, name, mesh)

    def logical_constraint(self, x, names, mesh=None):
        """`x` laid out by the logical names of its dimensions, read through the plan's
        `axes` table, as `flax.linen.with_logical_constraint` does with its rules; one
        edit of the table moves parameters and activations together. A name with no
        entry (P101), names that do not fit the rank (P344) or axes that do not divide the
        value (P317) raise `PlanError`.

        >>> import jax.numpy as jnp, planc
        >>> plan = planc.loads("mesh(data = 2, tp = 4)\\nmodel_parallel(batch = data)\\n"
        ...                    "axes { batch -> data  mlp -> tp }")
        >>> tuple(plan.logical_constraint(jnp.ones((8, 16)), ("batch", "mlp")).sharding.spec)
        ('data', 'tp')
        """
        return self._activations().logical_constraint(self._ir, x, names, mesh)

    def logical_spec(self, names, shape=None):
        """The `PartitionSpec` of an array whose dimensions are named `names`, through the
        `axes` table (as `flax.linen.logical_to_mesh_axes`); with `shape`, checked to divide.

        >>> import planc
        >>> tuple(planc.loads("mesh(fsdp = 4, tp = 2)\\nmodel_parallel(batch = fsdp)\\n"
        ...                   "axes { embed -> fsdp  mlp -> fsdp  mlp -> tp }"
        ...                   ).logical_spec(("embed", "mlp")))
        ('fsdp', 'tp')
        """
        return self._activations().logical_spec(self._ir, names, shape)

    def pipeline(self, layer_fn, mesh=None):
        """`run(stacked, inputs)`: `layer_fn(layer_params, x) -> x` scanned over the layers
        stacked on the leading dimension of `stacked`, run as the plan's `stages` over its
        pipeline axis, each of the plan's microbatches (the leading dimension of `inputs`)
        in turn; the result, and its gradients, equal the plain scan's
        (`planc.targets.jax.pipeline`).

        >>> import jax, jax.numpy as jnp, planc
        >>> plan = planc.loads("mesh(pipe = 2, data = 4)\\nmodel_parallel(batch = data)\\n"
        ...                    "stages(pipe, microbatches = 4) { \\".*\\" -> 0 }")
        >>> run = plan.pipeline(lambda w, x: jnp.tanh(x @ w))
        >>> w, x = jnp.ones((4, 3, 3)) / 3, jnp.ones((4, 2, 3))
        >>> scanned = jax.vmap(lambda x: jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None),
        ...                                           x, w)[0])(x)
        >>> bool(jnp.allclose(run(w, x), scanned))
        True
        """
        from planc.targets.jax.pipeline import pipeline

        return pipeline(self._ir, layer_fn, mesh)

    def activation_spec(self, name: str, rank: int, mesh=None):
        """The `PartitionSpec` the `outputs` rules give a value `name` of `rank`, or None."""
        return self._activations().activation_spec(self._ir, name, rank, mesh)

    def shard_map(self, f, *, in_specs, out_specs, mesh=None, **kwargs):
        """`jax.shard_map` on the plan's mesh; a spec may be an `outputs` rule's name."""
        return self._activations().shard_map(self._ir, f, in_specs=in_specs,
                                             out_specs=out_specs, mesh=mesh, **kwargs)

    # -- ahead of time (planc.targets.aot) ---------------------------------------------------

    def aot(self, step, params=None, opt_state=None, batch=None, *, topology=None,
            donate: bool = True, optimizer=None, loss=None):
        """The training step compiled for `topology` with no accelerator attached; returns
        a `planc.targets.aot.report.AotReport` (XLA's per-device memory, the collectives
        by mesh axis, the largest arguments, P807 when the peak exceeds `budget(peak)`).

        `step(params, opt_state, batch)` returns `(params, opt_state, ...)`; the trees hold
        arrays or `jax.ShapeDtypeStruct`s, read for their shapes and dtypes only.
        `topology` is a name `jax.experimental.topologies` takes (`"v5e:2x4"`, compile-only
        through libtpu) or `"cpu:N"` (an estimate). `plan.aot(model, batch=(x, y),
        optimizer=..., loss=..., topology=...)` compiles a Keras model's own stateless
        training step. The plan's problems, the topology's and the step's raise one
        `PlanError` before anything is compiled where they can be found first.
        """
        from planc.targets.aot.jax_step import aot

        return aot(self._ir, step, params, opt_state, batch, topology=topology,
                   donate=donate, optimizer=optimizer, loss=loss)

    def cost(self, step, params=None, opt_state=None, batch=None, *, topology=None,
             calibration: str | None = None, chip: str | None = None, donate: bool = True,
             optimizer=None, loss=None):
        """The training step's predicted time on `topology`, from the same compile as
        `plan.aot`: a `planc.targets.cost.report.CostReport` (`time` bounds and estimate,
        FLOPs and HBM bytes with loops' trip counts multiplied in, collectives per mesh
        axis, the bottleneck by plan rule, P813 when the estimate exceeds
        `budget(step)`). `calibration` is a `planc.calibration/1` file fitted on the chip
        (default: the one planc ships for the chip, if any; `"none"`: the chip's peak
        rates); `chip` prices a `cpu:N` compile as that chip (default `v5e`).
        `plan.cost(model, batch=(x, y), optimizer=..., loss=..., topology=...)` costs a
        Keras model's own stateless training step, compiled as `plan.aot` compiles it.

        >>> import jax, jax.numpy as jnp, planc
        >>> plan = planc.loads('mesh(data = 8)  data_parallel')
        >>> def step(params, opt_state, batch):
        ...     grad = jax.grad(lambda w: jnp.mean((batch @ w) ** 2))(params["w"])
        ...     return {"w": params["w"] - 0.1 * grad}, opt_state, None
        >>> params = {"w": jax.ShapeDtypeStruct((64, 64), jnp.float32)}
        >>> batch = jax.ShapeDtypeStruct((32, 64), jnp.float32)
        >>> report = plan.cost(step, params, {}, batch, topology="cpu:8")
        >>> report.lower_s <= report.estimate_s <= report.upper_s
        True
        """
        from planc.targets.aot.jax_step import aot
        from planc.targets.cost.calibration import read_before_compile
        from planc.targets.cost.estimate import cost_of

        if isinstance(topology, str):  # a bad calibration file costs no compile
            calibration = read_before_compile(calibration, self._ir, topology, chip)
        compiled = aot(self._ir, step, params, opt_state, batch, topology=topology,
                       donate=donate, optimizer=optimizer, loss=loss)
        return cost_of(self._ir, compiled, calibration=calibration, chip=chip)

    # -- Keras (planc.targets.keras.distribution) ---------------------------------------------

    def _keras_backend(self):
        from planc.targets.keras import distribution as backend

        return backend

    @property
    def device_mesh(self):
        """A `keras.distribution.DeviceMesh` with the JAX target's device order (built on
        first access, then the same object)."""
        if "device_mesh" not in self._keras:
            self._keras["device_mesh"] = self._keras_backend().device_mesh(self._ir)
        return self._keras["device_mesh"]

    @property
    def layout_map(self):
        """A `keras.distribution.LayoutMap` whose lookups are planc's resolution (built on
        first access over `plan.device_mesh`, then the same object)."""
        if "layout_map" not in self._keras:
            self._keras["layout_map"] = self._keras_backend().layout_map(
                self._ir, mesh=self.device_mesh, plan_of=Plan)
        return self._keras["layout_map"]

    def to_keras(self):
        """`DataParallel` or `ModelParallel` for this plan."""
        return self._keras_backend().to_keras(self._ir, plan_of=Plan)

    def activate(self):
        """The Keras distribution scope: `with plan.activate(): model = build()`."""
        return self._keras_backend().activate(self._ir, plan_of=Plan)

    # -- PyTorch (planc.targets.torch.distribute) ---------------------------------------------

    def _torch(self):
        try:
            from planc.targets.torch import distribute as backend
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] == "torch":
                raise ModuleNotFoundError("planc's torch target needs torch: "
                                          "pip install 'planc[torch]'") from None
            raise
        return backend

    def torch_mesh(self):
        """A torch `DeviceMesh` with the plan's axes over every process of the job (under
        torchrun), ranks in row-major mesh order; the process group is started if it is
        not (gloo on the CPU). A process count the mesh does not fit is a P201."""
        return self._torch().make_mesh(self._ir)

    def torch_placements(self, path: str, shape, mesh=None) -> list:
        """The DTensor placements of parameter `path` of `shape`: `Shard(d)` or
        `Replicate()`, one per mesh axis. Without `mesh`, `auto` takes its size from the
        job's process count. A layout DTensor cannot express is a P311 at its rule."""
        return self._torch().placements(self._ir, path, shape, mesh)

    def pipeline_stages(self, module, mesh=None, device=None) -> list:
        """This process's `torch.distributed.pipelining.PipelineStage`s of `module`: its
        coordinate on the pipeline axis picks its stage (V of them for `interleaved(V)`),
        each a copy of `module` keeping only the stage's modules, as `planc compile
        --target torchtitan` lists them (`planc.targets.torch.pipeline`)."""
        from planc.targets.torch.pipeline import pipeline_stages

        return pipeline_stages(self._ir, module, mesh, device)

    def pipeline_schedule(self, stages, loss_fn=None):
        """The plan's schedule (`ScheduleGPipe`, `Schedule1F1B`,
        `ScheduleInterleaved1F1B`) over `stages` with the plan's microbatches."""
        from planc.targets.torch.pipeline import pipeline_schedule

        return pipeline_schedule(self._ir, stages, loss_fn)

    def distribute_module(self, module, mesh=None):
        """`module` (a `torch.nn.Module`) with every parameter a DTensor placed by the plan,
        in place; returns it. A parameter's path is its name in `named_parameters()`.
        Every parameter is resolved first: one `PlanError` carries every problem and
        nothing moves. Each rank holds the slice the JAX target gives the device at the
        same mesh coordinate (docs/torch.md)."""
        return self._torch().distribute_module(self._ir, module, mesh)

    # -- loading (planc.checkpoints.sharded.load) ---------------------------------------------

    def load(self, source, like=None, *, dtype=None, strict: bool = False):
        """Put the checkpoint `source` on this plan's mesh, each device reading its shard.

        `source` is a ``.safetensors`` file, a sharded ``*.safetensors.index.json``, an
        ``.npz``, a Keras ``.weights.h5`` or an Orbax checkpoint directory. Tensor names
        go through the plan's `rename` rules. `like` says what to fill: None gives
        ``{path: jax.Array}``; a pytree of arrays or `jax.ShapeDtypeStruct`s gives that
        pytree, filled by path; a Keras model built under `plan.activate()` has every
        variable assigned (its optimizer state untouched) and is returned. Dtypes must
        match unless `dtype` asks for a cast; `strict` makes a tensor no variable takes
        an error. Everything is checked from headers first: any problem raises one
        `PlanError` before a byte of data is read, and a Keras model is either filled
        whole or left as it was. Warnings come as `CheckpointWarning`s.

        >>> import numpy as np, os, tempfile, safetensors.numpy, planc
        >>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
        >>> safetensors.numpy.save_file({"proj.weight": np.ones((4, 8), np.float32)}, path)
        >>> plan = planc.loads('''
        ... mesh(batch = auto, model = 2)
        ... model_parallel(batch = batch)
        ... layout { "proj/kernel" -> (_, model) }
        ... rename { "proj\\\\.weight" -> "proj/kernel" transpose }
        ... ''')
        >>> kernel = plan.load(path)["proj/kernel"]
        >>> kernel.shape, tuple(kernel.sharding.spec)
        ((8, 4), (None, 'model'))
        """
        from planc.checkpoints.sharded.load import load

        return load(self._ir, source, like, dtype=dtype, strict=strict)

    def from_preset(self, cls, preset, *, dtype=None, strict: bool = False, **kwargs):
        """`cls.from_preset(preset, **kwargs)` built under this plan, each variable holding
        only its shards of the preset's weights.

        `preset` is a keras-hub preset directory (as ``save_to_preset`` writes it:
        ``config.json`` and ``model.weights.h5``, or ``model.weights.json`` and its parts)
        or a handle keras-hub resolves to one; `cls` is the keras-hub class its
        ``config.json`` names or a base of it (P420). The variables are created without
        values, every tensor is paired with its variable and every layout resolved from
        headers alone (any problem is one `PlanError` before a byte is read), then each
        device's slice is read into its shard, as `load` does. `kwargs` go to keras-hub's
        ``from_preset``; `dtype` and `strict` are `load`'s.
        """
        from planc.checkpoints.sharded.preset import from_preset

        return from_preset(self._ir, cls, preset, plan_of=Plan, dtype=dtype, strict=strict,
                           **kwargs)

    # -- saving (planc.checkpoints.sharded.orbax_save_restore) --------------------------------

    def save(self, tree, directory) -> None:
        """Write `tree` (sharded `jax.Array`s) as an Orbax checkpoint at `directory`, with
        this plan's name, fingerprint and text recorded in it; call it on every process.

        Each process writes its own shards and Orbax commits the directory atomically;
        an existing `directory` raises `FileExistsError`, a Python `bool` leaf
        `ValueError` (Orbax cannot read one back). `plan.load(directory)` under another
        plan reshards it and says so in a note (P417).
        """
        from planc.checkpoints.sharded.orbax_save_restore import save

        save(self._ir, tree, directory)

    # -- multi-host (planc.multihost.cluster) -------------------------------------------------

    def initialize(self, *, timeout: float | None = None, heartbeat: float | None = None):
        """Start the JAX distributed runtime from the `cluster` block (or KERAS_* env vars);
        `heartbeat` (seconds) ends a job whose process stops answering (P617)."""
        from planc.multihost.cluster import initialize

        return initialize(self._ir, timeout=timeout, heartbeat=heartbeat)


def loads(text: str, *, file: str = "<string>", allow_include_outside: bool = False,
          **params) -> Plan:
    """Check plan text; return a `Plan` or raise `PlanError` with every diagnostic.

    `params` override the plan's `param` declarations (as `-D name=value` does).

    >>> import planc
    >>> planc.loads("param tp = 2\\nmesh(batch = auto, model = tp)\\nmodel_parallel(batch = batch)",
    ...             tp=4).mesh_axes
    {'batch': None, 'model': 4}
    """
    return Plan(check(text, file, params, allow_include_outside=allow_include_outside))


def load_plan(path: str | os.PathLike, *, allow_include_outside: bool = False,
              **params) -> Plan:
    """Read and check a plan file (`*.kd`); return a `Plan` or raise `PlanError`.

    An unreadable path raises `OSError`; everything wrong inside the file is a
    `PlanError` whose diagnostics point at the file, line and column.
    """
    return Plan(check_file(path, params, allow_include_outside=allow_include_outside))

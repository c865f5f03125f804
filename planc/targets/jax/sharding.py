"""The JAX target: a plan as `jax.sharding` objects.

Every layout comes from `planc.resolve.Resolver`, the one matching engine; this module
only turns its answers into `Mesh`, `PartitionSpec` and `NamedSharding`, and moves
arrays. The `Plan` facade calls these functions with its IR (`plan.mesh()`,
`plan.shard(tree)`, ...); each binds the IR to the device count it is given.

Choices a user should know:

- **Mesh.** `auto` is resolved for the number of devices given (default
  `jax.devices()`). Devices are placed by `planc.targets.devices` (topology-aware where
  `jax.experimental.mesh_utils` knows the topology, row-major elsewhere, as Keras's
  `DeviceMesh` does; `slices(axis = N)` meshes slice by slice). The mesh's axis types
  are the plan's `axis_types` (`auto` unless it says otherwise, as Keras builds it). A
  device count that does not fit the mesh, or devices that cannot form its slices, is a
  `PlanError` (P201).
- **Explicit axes.** On an `explicit` axis the sharding is part of an array's type
  (`jax.typeof(x).sharding.spec`). Arrays placed by `shard`, `init`, `shard_batch` carry
  the plan's spec in their type. Inside a traced function, placement (`shard` on
  tracers, `constrain`) uses `jax.sharding.reshard` for the explicit axes of a spec and
  `jax.lax.with_sharding_constraint` for its auto axes; outside one, `jax.device_put`.
  The activation helpers are in `planc.targets.jax.activations`.
- **Blocks.** JAX has no block sharding: `model[128]` is a divisibility constraint
  (the dimension must divide by 128 x size(model), checked by the resolver) and the
  `PartitionSpec` entry is the plain axis `"model"`. Contiguous equal shards of a
  dimension divisible by 128 x n are whole blocks of 128 anyway.
- **Paths.** A pytree leaf's path is its keys joined by "/", exactly as
  `planc.sources` reads pytrees (dict keys, sequence indices, field names).
- **Errors first.** `shardings`, `shard`, `init` and `shard_batch` resolve every leaf
  and raise one `PlanError` with every diagnostic before any array is created or moved.
- **Optimizer state.** With `params=`, a subtree of the state with the parameters'
  structure (optax's `mu`, `nu`, ...) mirrors them leaf for leaf; any other leaf belongs
  to the one parameter whose path is a "/"-suffix of the leaf's path and whose shape
  equals the leaf's, and a leaf several parameters could own alike is P341, never
  decided by path length. A slot takes the layout of the `state` rule that
  matches that parameter's path, or, where none does, the parameter's own (the slot
  mirrors it). Any other leaf (a step count, a factored second moment) is replicated in
  device memory. `init` does this for the second element when `fn` returns a plain
  2-tuple `(params, opt_state)`, and `plan.load` for a `like` that is one.
- **Memory kinds.** A layout written `... on host` (in `layout`, `state` or `outputs`) is
  a `NamedSharding` with `memory_kind="pinned_host"`; every other sharding names no
  memory kind (the devices' own). Devices with no `pinned_host` memory raise P340 at
  the rule before anything is placed (`planc.targets.jax.compat.require_host_memory`).
"""

from __future__ import annotations

import functools
import math
import weakref

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from planc.diagnostics import PlanError, Span, error
from planc.check.binding import bind_devices
from planc.ir import PlanIR
from planc.resolve import Assignment, ResolvedLayout, Resolver, replicated, slot_assignments
from planc.targets.devices import _device_grid, _device_list
from planc.targets.emit.runtime.tree import _Unusual, _leaf_shape, _mapped, _owners, _stray
from planc.targets.expressible import indivisible_batch, scalar_batch
from planc.targets.jax.compat import (axis_type, require, require_host_memory,
                                     require_host_outputs)
from planc.targets.jax.paths import leaves_with_paths, own_names
from planc.variables import Variable

__all__ = [
    "make_mesh", "partition_spec", "shardings", "shard", "init", "init_jit",
    "data_sharding", "shard_batch", "output_sharding", "tree_paths", "place",
    "mirrored_parameters", "tree_shardings", "model_shardings", "variable_shardings",
]


# -- the plan on a device count ------------------------------------------------------------

# Binding `auto` and compiling a Resolver's RE2 sets cost more than resolving a path, so
# both are kept per IR object. Keyed by identity, not equality: two equal IRs from
# different files must keep their own spans for diagnostics.
_CACHE: dict[tuple, tuple[weakref.ref, object]] = {}
_CACHE_LIMIT = 256


def _cached(ir: PlanIR, key: tuple, make):
    full = (id(ir),) + key
    hit = _CACHE.get(full)
    if hit is not None and hit[0]() is ir:
        return hit[1]
    value = make()
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[full] = (weakref.ref(ir), value)
    return value


def _bound(ir: PlanIR, devices: int) -> PlanIR:
    """`ir` with `auto` resolved for `devices` devices (P201 if it does not fit)."""
    return _cached(ir, ("bound", devices), lambda: bind_devices(ir, devices))


def _resolver(ir: PlanIR, section: str = "layout") -> Resolver:
    return _cached(ir, ("resolver", section), lambda: Resolver(ir, section))


def _ir_for_mesh(ir: PlanIR, mesh: Mesh, abstract: bool = False) -> PlanIR:
    """`ir` bound to `mesh`'s device count, after checking the mesh is the plan's (with
    `abstract`, `mesh` may be the `AbstractMesh` a program is traced under)."""
    kinds = (Mesh, jax.sharding.AbstractMesh) if abstract else Mesh
    if not isinstance(mesh, kinds):
        raise TypeError(f"mesh must be a jax.sharding.Mesh, not {type(mesh).__name__}")
    names = tuple(mesh.axis_names)
    if sorted(names) != sorted(ir.mesh.names):
        raise ValueError(f"the mesh has axes {names}, but plan {ir.name!r} has "
                         f"{tuple(ir.mesh.names)}; build the mesh with plan.mesh()")
    bound = _bound(ir, int(mesh.size))
    wrong = [f"`{a.name}` is {mesh.shape[a.name]} in the mesh but {a.global_size} in the plan"
             for a in bound.mesh.axes if mesh.shape[a.name] != a.global_size]
    types = dict(zip(mesh.axis_names, (str(t.name).lower() for t in mesh.axis_types)))
    wrong += [f"`{n}` is {types[n]} in the mesh but {t} in the plan"
              for n, t in zip(bound.mesh.names, bound.mesh_axis_types) if types[n] != t]
    if wrong:
        raise ValueError(f"the mesh does not match plan {ir.name!r}: " + "; ".join(wrong))
    return bound


# -- mesh ------------------------------------------------------------------------------------

def _jax_devices(devices):
    """`devices` (None: `jax.devices()`) with each checked to be a jax device, which
    `_device_list` takes for granted."""
    if devices is None:
        return None
    listed = devices.ravel().tolist() if isinstance(devices, np.ndarray) else list(devices)
    for d in listed:
        if not hasattr(d, "platform") or not hasattr(d, "id"):
            raise TypeError(f"expected jax devices, got {type(d).__name__}")
    return listed


def make_mesh(ir: PlanIR, devices=None) -> Mesh:
    """A `jax.sharding.Mesh` for the plan over `devices` (default: `jax.devices()`).

    `auto` takes the devices the other axes leave; a count that does not fit raises
    `PlanError` (P201). See the module docstring for the device order and slices.
    """
    devices = _device_list(_jax_devices(devices))
    bound = _bound(ir, len(devices))
    try:
        grid = _device_grid(bound.mesh.shape, bound.mesh.slice_shape, devices)
    except ValueError as exc:
        span = bound.mesh.span or Span.start_of(bound.file)
        raise PlanError((error("P201", f"the devices do not fit the mesh: {exc}", span,
                               label="this mesh", devices=len(devices)),),
                        bound.source_dict) from None
    types = tuple(axis_type(bound, t) for t in bound.mesh_axis_types)
    return Mesh(grid, bound.mesh.names, axis_types=types)


def _mesh(ir: PlanIR, mesh):
    if mesh is None:
        mesh = make_mesh(ir)
    return mesh, _ir_for_mesh(ir, mesh)


# -- one variable ------------------------------------------------------------------------

def _checked_shape(shape) -> tuple[int, ...]:
    """`shape` as a tuple of ints; TypeError or ValueError when it is not a shape."""
    try:
        out = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be a sequence of integers, not {shape!r}") from None
    for d in out:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise ValueError(f"shape must hold non-negative integers, not {shape!r}")
    return tuple(int(d) for d in out)


def _spec(layout: ResolvedLayout) -> PartitionSpec:
    return PartitionSpec(*layout.axes)


def _sharding(mesh: Mesh, layout: ResolvedLayout) -> NamedSharding:
    """The `NamedSharding` of `layout` on `mesh`, in pinned host memory when it is `on host`."""
    if layout.host:
        return NamedSharding(mesh, _spec(layout), memory_kind="pinned_host")
    return NamedSharding(mesh, _spec(layout))


def _shardings_of(ir: PlanIR, mesh: Mesh, assignments) -> list[NamedSharding]:
    """One `NamedSharding` per assignment; P340 first when one is `on host` and the
    mesh's devices have no pinned host memory."""
    host = [a.rule for a in assignments if a.layout.host]
    if host:
        require_host_memory(ir, host, mesh.devices.flat[0])
    # Hand-tuned, as the profile of bench/shardings.py asks: a fresh PartitionSpec and
    # NamedSharding per leaf was a sixth of the call; a model has a handful of distinct
    # layouts. Keyed by the layout object first: the resolver hands every leaf of one
    # (rule, shape) the same one, and an id is cheaper to hash than the axes.
    by_id: dict = {}
    by_layout: dict = {}
    out = []
    append = out.append
    for a in assignments:
        layout = a.layout
        named = by_id.get(id(layout))
        if named is None:
            key = (layout.axes, layout.host)
            named = by_layout.get(key)
            if named is None:
                named = by_layout[key] = _sharding(mesh, layout)
            by_id[id(layout)] = named
        append(named)
    return out


def _ir_for_devices(ir: PlanIR) -> PlanIR:
    if ir.mesh.auto_axis is not None:
        # A size for `auto` changes which alternatives fit: use the devices JAX sees.
        ir = _bound(ir, len(jax.devices()))
    return ir


def partition_spec(ir: PlanIR, path: str, shape) -> PartitionSpec:
    """The `PartitionSpec` the plan gives variable `path` of `shape`.

    An `auto` axis takes its size from `len(jax.devices())`. Raises `PlanError` when the
    variable has no valid layout (unmatched with rank >= 2, ambiguous, rank mismatch,
    indivisible dimension).

    A block (`model[128]`) is a divisibility constraint only: its entry is `"model"`.
    """
    if not isinstance(path, str):
        raise TypeError(f"path must be a string, not {type(path).__name__}")
    ir = _ir_for_devices(ir)
    return _spec(_layout(ir, Variable(path, _checked_shape(shape))))


def _layout(ir: PlanIR, var: Variable) -> ResolvedLayout:
    return _resolver(ir).layout(var)


# -- pytrees -------------------------------------------------------------------------------

def tree_paths(tree) -> tuple[list[tuple[str, object]], object]:
    """`([(path, leaf), ...], treedef)`: every leaf with its "/"-joined path, as
    `planc.sources` names pytree leaves, in `jax.tree_util` order."""
    return leaves_with_paths(tree)


def _resolve_leaves(ir: PlanIR, leaves, section: str = "layout", named=None
                    ) -> tuple[tuple, list]:
    """The assignments of `[(path, leaf)]` by the plan's `section` rules, and the errors
    found; `named` maps paths to the logical names their Flax boxes give them."""
    variables = _variables(leaves)
    if named:
        variables = [v._replace(names=named[v.path]) if v.path in named else v
                     for v in variables]
    resolution = _resolver(ir, section).resolve_all(variables)
    errors = [d for d in resolution.diagnostics if d.is_error]
    return resolution.assignments, errors


def _variables(leaves) -> list[Variable]:
    """A `Variable` per `(path, leaf)`. Hand-tuned, as the profile of bench/shardings.py
    asks: each distinct `.shape` tuple is checked and converted once (`_leaf_shape` would
    give equal tuples the same answer), not once a leaf."""
    shapes: dict = {}
    out = []
    append = out.append
    new = tuple.__new__  # Variable(path, shape) without the named tuple's Python __new__
    for path, leaf in leaves:
        raw = getattr(leaf, "shape", None)
        shape = shapes.get(raw) if type(raw) is tuple else None
        if shape is None:
            shape = _leaf_shape(leaf)
            if type(raw) is tuple:
                shapes[raw] = shape
        append(new(Variable, (path, shape, "float32", None)))
    return out


def mirrored_parameters(ir: PlanIR, tree, params, leaves, param_leaves) -> list[int | None]:
    """For each `(path, leaf)` of `leaves` (optimizer state `tree`'s), the index in
    `param_leaves` (`params`') of the parameter it mirrors, or None (a step count): the
    emitted module's own rule (`planc.targets.emit.runtime.tree._owners`). A leaf two
    parameters could own alike raises `PlanError` (P341), never decided silently."""
    owners, ambiguous = _owners(tree, params, leaves, param_leaves)
    if ambiguous:
        path, names = ambiguous[0]
        raise PlanError((error(
            "P341", f"optimizer leaf `{path}` could mirror any of the parameters "
                    + ", ".join(f"`{n}`" for n in names) + (
                        f" ({len(ambiguous)} such leaves)" if len(ambiguous) > 1 else ""),
            None, file=ir.file,
            help=("its tree does not have the parameters' structure, so only its path ties "
                  "it to a parameter, and the paths tie it to several",
                  "pass as `params=` the tree the state mirrors (optax's `mu` and `nu` have "
                  "the parameters' structure), or give the parameters names that are not "
                  "suffixes of each other")),), ir.source_dict)
    stray = _stray(owners, leaves, param_leaves)
    if stray is not None:
        raise PlanError((error(
            "P342", f"optimizer leaf `{stray}` mirrors no parameter, and neither does any "
                    "other leaf of the state: its `state` rules and `on host` layouts would "
                    "be ignored", None, file=ir.file,
            help=("a leaf mirrors the parameter whose path ends its path and whose shape is "
                  "its shape, or sits in a subtree shaped like the parameters",
                  "pass the parameters this state belongs to; a function that returns two "
                  "groups of parameters (not parameters and their optimizer state) should "
                  "return a dict or a list, not a 2-tuple")),), ir.source_dict)
    return owners


def _mirror(ir: PlanIR, tree, params, leaves, param_leaves, slots) -> list[Assignment]:
    """Each leaf's assignment: that of the slots (`slots`, parallel to `param_leaves`) of
    the parameter it mirrors (`mirrored_parameters`); replicated in device memory, with
    no rule, when there is none."""
    out = []
    for i, (path, leaf) in zip(mirrored_parameters(ir, tree, params, leaves, param_leaves),
                               leaves):
        if i is None:
            shape = _leaf_shape(leaf)
            out.append(Assignment(Variable(path, shape), replicated(len(shape)), None))
        else:
            out.append(slots[i])
    return out


def _tree_assignments(ir: PlanIR, tree, params=None):
    """(treedef, leaves, assignments, errors) for `tree`; with `params`, each leaf takes
    its parameter's slot layout (see the module docstring)."""
    leaves, treedef = tree_paths(tree)
    if params is None:
        named = own_names(tree) if ir.logical_axes else None
        assignments, errors = _resolve_leaves(ir, leaves, named=named)
        return treedef, leaves, assignments, errors
    param_leaves, _ = tree_paths(params)
    named = own_names(params) if ir.logical_axes else None
    slots, errors = _resolve_leaves(ir, param_leaves, named=named)
    if ir.has_state_rules:
        state, state_errors = _resolve_leaves(ir, param_leaves, "state")
        errors += state_errors
        slots = slot_assignments(slots, state)
    return treedef, leaves, _mirror(ir, tree, params, leaves, param_leaves, slots), errors


def tree_shardings(ir: PlanIR, mesh: Mesh, tree, params=None):
    """`tree`'s `NamedSharding`s (a pytree of them) on `mesh`, `ir` bound to it; with
    `params`, as optimizer state (see the module docstring). Every error of every leaf
    is raised in one `PlanError`."""
    if params is None:
        quick = _quick_shardings(ir, mesh, tree)
        if quick is not None:
            return quick
    treedef, _, assignments, errors = _tree_assignments(ir, tree, params)
    _raise(ir, errors)
    return jax.tree_util.tree_unflatten(treedef, _shardings_of(ir, mesh, assignments))


def _quick_shardings(ir: PlanIR, mesh: Mesh, tree):
    """`tree_shardings` in one walk of `tree` (`_mapped`), each leaf resolved as it is met
    (`Resolver.quick`); None where that walk does not apply: a node it does not open, a
    leaf with an error or a layout in host memory, a plan that reads logical names. The
    caller's general path then answers, and raises every error. Its answers are the
    general path's (tests/targets/jax/test_shardings_walk.py)."""
    by_axes: dict = {}

    def sharding_of(layout):
        if layout.host:
            return None
        named = by_axes.get(layout.axes)
        if named is None:
            named = by_axes[layout.axes] = _sharding(mesh, layout)
        return named

    answer = _resolver(ir).quick(sharding_of)
    if answer is None:
        return None
    try:
        return _mapped(tree, answer)
    except _Unusual:
        return None


def variable_shardings(ir: PlanIR, variables, mesh=None) -> dict:
    """`{path: NamedSharding}` of planc `Variable`s (a checkpoint's tensors, before any
    array exists), by the `layout` rules; every error is raised in one `PlanError`."""
    mesh, ir = _mesh(ir, mesh)
    variables = list(variables)
    resolution = _resolver(ir).resolve_all(variables)
    _raise(ir, [d for d in resolution.diagnostics if d.is_error])
    return dict(zip((v.path for v in variables),
                    _shardings_of(ir, mesh, resolution.assignments)))


def model_shardings(ir: PlanIR, tree, mesh=None):
    """The shardings of `tree` (a pytree of them): a plain 2-tuple is `(params,
    opt_state)`, the state laid out as its parameters' slots; anything else is laid out
    by the `layout` rules. What `init` gives `fn`'s outputs and `plan.load` a `like` tree."""
    mesh, ir = _mesh(ir, mesh)
    return _model_shardings(ir, mesh, tree)


def _model_shardings(ir: PlanIR, mesh: Mesh, tree):
    if type(tree) is tuple and len(tree) == 2:
        params, state = tree
        # Both resolved before either is raised: one PlanError holds every problem.
        treedef, _, assignments, errors = _tree_assignments(ir, params)
        state_def, _, state_assignments, state_errors = _tree_assignments(ir, state, params)
        _raise(ir, errors + [d for d in state_errors if d not in errors])
        return (jax.tree_util.tree_unflatten(treedef, _shardings_of(ir, mesh, assignments)),
                jax.tree_util.tree_unflatten(state_def,
                                             _shardings_of(ir, mesh, state_assignments)))
    return tree_shardings(ir, mesh, tree)


def _raise(ir: PlanIR, errors) -> None:
    if errors:
        raise PlanError(tuple(errors), ir.source_dict)


def shardings(ir: PlanIR, tree, mesh=None, params=None):
    """A pytree of `NamedSharding` with `tree`'s structure, one per leaf.

    Leaves are arrays, `jax.ShapeDtypeStruct`s or anything with `.shape`; Python numbers
    are scalars (replicated). With `params=`, the leaves are optimizer state: each takes
    its parameter's slot layout, by the `state` rules or mirroring the parameter (see the
    module docstring). A layout `on host` is in pinned host memory. Every error of every
    leaf is raised in one `PlanError`.
    """
    mesh, ir = _mesh(ir, mesh)
    return tree_shardings(ir, mesh, tree, params)


def shard(ir: PlanIR, tree, mesh=None, params=None):
    """`tree` placed on the mesh as the plan lays it out (`jax.device_put`); with
    `params=`, as the optimizer state of those parameters (see `shardings`).

    Nothing moves unless every leaf resolves without error.
    """
    placement = shardings(ir, tree, mesh=mesh, params=params)
    leaves = jax.tree_util.tree_leaves(tree)
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return jax.tree_util.tree_map(place, tree, placement)
    return jax.device_put(tree, placement)


def place(x, sharding: NamedSharding):
    """`x` laid out as `sharding`: `jax.device_put` outside a traced function; inside one,
    `jax.sharding.reshard` over the spec's explicit axes, then
    `jax.lax.with_sharding_constraint` over its auto axes (JAX accepts each primitive only
    on its own kind of axis). A dimension split over axes of both kinds ends up with its
    explicit axes major. The emitted module's `_place` (`runtime.for_jax`) does the same."""
    if not isinstance(x, jax.core.Tracer):
        return jax.device_put(x, sharding)
    x = _place_traced(x, sharding)
    # A memory kind is no constraint XLA keeps: inside `jit` it is a placement of its own.
    if getattr(sharding, "memory_kind", None) == "pinned_host":
        x = jax.device_put(x, sharding)
    return x


def _place_traced(x, sharding: NamedSharding):
    mesh, spec = sharding.mesh, sharding.spec
    kinds = dict(zip(mesh.axis_names, (str(t.name).lower() for t in mesh.axis_types)))
    explicit = _only(spec, kinds, "explicit")
    auto = _only(spec, kinds, "auto")
    if any(kinds[a] == "explicit" for a in mesh.axis_names):
        reshard = require("reshard", needed_for="a layout on explicit axes inside `jit`")
        x = reshard(x, NamedSharding(mesh, explicit))
    if any(kinds[a] == "auto" for a in mesh.axis_names):
        x = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, auto))
    return x


def _only(spec: PartitionSpec, kinds: dict, kind: str) -> PartitionSpec:
    """`spec` keeping only the axes of `kind` (the others become unsplit)."""
    out = []
    for entry in spec:
        axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        kept = tuple(a for a in axes if kinds.get(a) == kind)
        out.append(None if not kept else kept[0] if len(kept) == 1 else kept)
    return PartitionSpec(*out)


def init_jit(ir: PlanIR, fn, *args, mesh=None, **kwargs):
    """`(jitted, out_shardings)`: `fn` compiled to write its outputs straight into the
    plan's shardings. `init` runs this program; it is public so the compiled program can
    be inspected (`jitted.lower(*args).compile().output_shardings`, `.memory_analysis()`).
    On the CPU it is compiled with XLA's memory-minimising scheduler where the installed
    XLA takes the option."""
    mesh, ir = _mesh(ir, mesh)
    out = _model_shardings(ir, mesh, jax.eval_shape(fn, *args, **kwargs))
    _compilable(ir, mesh, out)
    return _init_program(fn, out, mesh), out


def _compilable(ir: PlanIR, mesh: Mesh, out) -> None:
    """P340 when some of `out` is in host memory and XLA cannot compile a program that
    writes there on `mesh` (see `require_host_outputs`)."""
    if any(s.memory_kind == "pinned_host" for s in jax.tree_util.tree_leaves(out)):
        require_host_outputs(ir, ir.host_rules(outputs=False), mesh)


def _init_program(fn, out, mesh):
    """`fn` under `jax.jit` with `out` as its output shardings and, on the CPU, the
    memory-minimising scheduler (None where it is refused: the plain program)."""
    options = _cpu_memory_scheduler(mesh) if _on_cpu(mesh) else None
    return jax.jit(fn, out_shardings=out, compiler_options=options)


def _on_cpu(mesh) -> bool:
    return mesh.devices.flat[0].platform == "cpu"


# XLA:CPU's default scheduler is concurrency-optimised: it runs independent work
# together and keeps the temporaries of every output of a program alive at once (each
# leaf's random bits: about 1x the model on top of the model itself). Its
# memory-minimising scheduler keeps about one leaf's worth (0.19x on the bench's model),
# and can be chosen for one compilation instead of the whole process (`XLA_FLAGS`).
# XLA renamed the option: jaxlib 0.7 knows only the boolean, later releases the enum and
# still accept the boolean but ignore it, so the enum is tried first. Each is tried on a
# trivial program (a refused key fails before anything is compiled), placed on the very
# devices the caller's program runs on: under `plan.use()` or `jax.set_mesh`, jit refuses
# a program whose devices differ from the current mesh's, and JAX 0.7 cannot clear it.
_CPU_MEMORY_SCHEDULER = (
    {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"},
    {"xla_cpu_enable_concurrency_optimized_scheduler": False},
)


@functools.cache
def _cpu_memory_scheduler(mesh=None) -> dict | None:
    """The `compiler_options` that select XLA:CPU's memory-minimising scheduler, or None
    when the installed XLA takes none of their spellings. Found once per CPU mesh (the
    first CPU device when `mesh` is None)."""
    if mesh is None:
        where = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    else:
        where = NamedSharding(mesh, PartitionSpec())
    for options in _CPU_MEMORY_SCHEDULER:
        probe = jax.jit(lambda: np.float32(0), compiler_options=options, out_shardings=where)
        try:
            probe.lower().compile()
        except jax.errors.JaxRuntimeError:
            continue
        return options
    return None


# Where the memory-minimising scheduler is refused, a model larger than this is
# computed on the CPU a group of outputs at a time, one program each (XLA drops the
# other outputs' work), so that only one group's temporaries are alive at once. Each
# group is one XLA compilation, so the groups are few: 6 groups, with `malloc_trim`
# after each, stayed near 1x the model where 16 without it reached 1.2x.
INIT_GROUP_MIN_BYTES = 64 * 2**20
INIT_GROUPS = 6


def _init_groups(sizes: list[int]) -> list[list[int]]:
    """Leaf indices in groups of about total / INIT_GROUPS bytes (at least the minimum)."""
    limit = max(INIT_GROUP_MIN_BYTES, sum(sizes) // INIT_GROUPS)
    groups: list[list[int]] = [[]]
    held = 0
    for i, n in enumerate(sizes):
        if groups[-1] and held + n > limit:
            groups.append([])
            held = 0
        groups[-1].append(i)
        held += n
    return groups


def init(ir: PlanIR, fn, *args, mesh=None, **kwargs):
    """Run `fn(*args, **kwargs)` so that its outputs are born sharded.

    The output shapes come from `jax.eval_shape`; `fn` then runs under `jax.jit` with
    those shardings as `out_shardings` (the program of `init_jit`), so each device
    computes only its own shards and no device ever holds a full copy of a sharded
    variable. On the CPU, where the devices' memory is the host's, it is one program
    compiled with XLA's memory-minimising scheduler, so temporaries stay a fraction of
    the model; where the installed XLA refuses that option, a model larger than
    `INIT_GROUP_MIN_BYTES` is computed in about `INIT_GROUPS` groups of outputs instead.
    When `fn` returns a plain 2-tuple it is read as `(params, opt_state)`: the state is
    laid out as its parameters' slots (`state` rules, else mirroring). Arguments are
    traced: pass configuration through `functools.partial`.
    """
    mesh, ir = _mesh(ir, mesh)
    shapes = jax.eval_shape(fn, *args, **kwargs)
    out = _model_shardings(ir, mesh, shapes)
    _compilable(ir, mesh, out)
    leaves, treedef = jax.tree_util.tree_flatten(shapes)
    sizes = [math.prod(l.shape) * l.dtype.itemsize for l in leaves]
    program = _init_program(fn, out, mesh)
    if not _on_cpu(mesh) or sum(sizes) <= INIT_GROUP_MIN_BYTES:
        # Off the CPU, outputs and temporaries live in device memory, whose schedulers
        # account for it, and nothing is left on the host to give back.
        return program(*args, **kwargs)
    if _cpu_memory_scheduler(mesh) is not None:
        compiled = program.lower(*args, **kwargs).compile()
        # The compiler's working memory is freed by now, but glibc keeps its pages and
        # the program's large buffers do not reuse them: given back first, they are not
        # counted again on top of the model (the bench's peak: 1.20x the model without
        # this, 1.04x with it).
        _return_freed_memory()
        values = jax.block_until_ready(compiled(*args, **kwargs))
        # The program's temporaries, freed as it ends, go back too.
        _return_freed_memory()
        return values
    flat_out = treedef.flatten_up_to(out)
    values: list = [None] * len(leaves)
    for group in _init_groups(sizes):
        def part(*a, _group=tuple(group), **k):
            flat = treedef.flatten_up_to(fn(*a, **k))
            return [flat[i] for i in _group]

        computed = jax.jit(part, out_shardings=[flat_out[i] for i in group])(*args, **kwargs)
        # This group's temporaries are freed once it has run; give them back to the OS
        # before the next group allocates its own.
        jax.block_until_ready(computed)
        _return_freed_memory()
        for i, value in zip(group, computed):
            values[i] = value
    return treedef.unflatten(values)


def _return_freed_memory() -> None:
    """glibc's `malloc_trim(0)`: free heap pages go back to the OS; a no-op off glibc."""
    import ctypes

    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


# -- data ----------------------------------------------------------------------------------

def _batch_entry(ir: PlanIR):
    axes = ir.batch_axes
    return axes[0] if len(axes) == 1 else tuple(axes)


def data_sharding(ir: PlanIR, rank: int = 2, mesh=None) -> NamedSharding:
    """The sharding of a batch of `rank` dimensions: dimension 0 over the batch axes
    (a tuple of axes, major to minor, when there are several), the rest not split."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"a batch needs rank >= 1 (its first dimension is split), "
                         f"not {rank!r}")
    mesh, ir = _mesh(ir, mesh)
    return NamedSharding(mesh, PartitionSpec(_batch_entry(ir), *(None,) * (rank - 1)))


def _local_batch_shards(mesh: Mesh, axes) -> int:
    """How many distinct batch shards this process's devices hold."""
    names = list(mesh.axis_names)
    where = [names.index(a) for a in axes]
    me = jax.process_index()
    seen = set()
    for index in np.ndindex(*mesh.devices.shape):
        if mesh.devices[index].process_index == me:
            seen.add(tuple(index[i] for i in where))
    return len(seen)


def shard_batch(ir: PlanIR, batch, mesh=None):
    """`batch` (a pytree of arrays, this process's part of the global batch) as global
    arrays split over the batch axes (`jax.make_array_from_process_local_data`).

    A global batch that the batch axes do not divide, or a scalar leaf, raises one
    `PlanError` (P312) naming every such leaf before anything is placed.
    """
    mesh, ir = _mesh(ir, mesh)
    leaves, treedef = tree_paths(batch)
    local_shards = _local_batch_shards(mesh, ir.batch_axes)
    several = jax.process_count() > 1
    problems = []
    arrays = []
    for path, leaf in leaves:
        arr = leaf if hasattr(leaf, "shape") and hasattr(leaf, "dtype") else np.asarray(leaf)
        if arr.ndim == 0:
            problems.append(scalar_batch(ir, path))
            continue
        local = int(arr.shape[0])
        if local % local_shards:
            problems.append(indivisible_batch(ir, local, leaf=path,
                                              shards=local_shards if several else None))
            continue
        arrays.append(arr)
    if problems:
        raise PlanError(tuple(problems), ir.source_dict)
    out = [jax.make_array_from_process_local_data(
        NamedSharding(mesh, PartitionSpec(_batch_entry(ir), *(None,) * (a.ndim - 1))), a)
        for a in arrays]
    return jax.tree_util.tree_unflatten(treedef, out)


# -- activations ----------------------------------------------------------------------------

def output_sharding(ir: PlanIR, path: str, rank: int, mesh=None) -> NamedSharding | None:
    """The sharding the plan's `outputs` rules give the output of layer `path` (for
    `jax.lax.with_sharding_constraint`), or None when no output rule matches it.

    Output rules match the layer's path (`decoder_block_0/attention`), not Keras's
    `"<layer>/output"` key. Only the rank decides among alternatives: XLA pads an
    activation dimension its axes do not divide, so that is not an error.
    """
    if not isinstance(path, str):
        raise TypeError(f"path must be a string, not {type(path).__name__}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank must be a non-negative integer, not {rank!r}")
    mesh, ir = _mesh(ir, mesh)
    if not ir.outputs and ir.outputs_default is None:
        return None
    # A dimension every axis product (and block) divides, so only the rank can fail.
    blocks = [d.block for r in ir.outputs + ((ir.outputs_default,) if ir.outputs_default
                                             else ())
              for alt in r.layout.alternatives for d in alt.head + alt.tail]
    size = math.prod(a.global_size for a in ir.mesh.axes) * max(blocks, default=1)
    assignment, problems = _resolver(ir, "outputs").resolve(Variable(path, (size,) * rank))
    if assignment.rule is None:
        return None
    _raise(ir, [p for p in problems if p.is_error])
    return _shardings_of(ir, mesh, [assignment])[0]

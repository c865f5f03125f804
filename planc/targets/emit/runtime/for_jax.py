"""The runtime of the module `planc compile --target jax` writes: its public functions.

The emitted module carries a verbatim copy of the sections below (`mesh`, then
`runtime`, `runtime: shardings` and `runtime: data and activations`), after the device
order of `planc.targets.devices`, the binding of `planc.targets.emit.runtime.binding` and
the resolver of `planc.targets.emit.runtime.resolve` (its `re2` section before `mesh`,
its `resolver` section between `mesh` and `runtime`), and runs where planc is not
installed. A plan with `state` rules or `on host` layouts gets
`planc.targets.emit.runtime.state`'s shardings in place of the section `runtime:
shardings`, and its activation wrappers after the last. So the code there uses only
`re`, jax and numpy, the names imported here (which the emitted module
imports or carries too) and the emitted module's constants, which stand here for a
plan of one `auto` axis, no rules and no default: every variable is replicated.
Writing a module reads this file without running it (`planc.targets.emit.codegen`).
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from planc.targets.devices import _device_grid, _device_list
from planc.targets.emit.runtime.binding import _bind
from planc.targets.emit.runtime.resolve import _fits, _quick, _resolve
from planc.targets.emit.runtime.tree import _Unusual, _mapped, _paths, _shape_once

PLAN_NAME = "runtime"
MESH_AXES: tuple = ("batch",)
SLICES: tuple = (1,)
AXIS_TYPES: tuple = ("auto",)
BATCH_AXES: tuple = ("batch",)
RULES: tuple = ()
DEFAULT = None
OUTPUT_RULES: tuple = ()
OUTPUT_DEFAULT = None


# -- copied into emitted modules: mesh ----------------------------------------------------

def make_mesh(devices=None):
    """A jax.sharding.Mesh over `devices` (default: jax.devices()), `auto` resolved."""
    devices = _device_list(devices)
    sizes = _bind(len(devices))
    grid = _device_grid(tuple(sizes[n] for n in MESH_AXES), SLICES, devices)
    return Mesh(grid, MESH_AXES, axis_types=_axis_types())


def _axis_types():
    kinds = getattr(jax.sharding, "AxisType", None)
    if kinds is None or any(not hasattr(kinds, t.capitalize()) for t in AXIS_TYPES):
        raise RuntimeError(f"jax {jax.__version__} has no mesh axis types {AXIS_TYPES}; "
                           "this module needs jax>=0.7.1")
    return tuple(getattr(kinds, t.capitalize()) for t in AXIS_TYPES)


def use(mesh=None):
    """jax.set_mesh over the plan's mesh (`make_mesh()` unless `mesh` is given): a
    setter, and a context manager (`with use(): ...`)."""
    if not hasattr(jax, "set_mesh"):
        raise RuntimeError(f"jax {jax.__version__} has no jax.set_mesh, which use() "
                           "calls; this module needs jax>=0.7.1")
    if mesh is None:
        mesh = make_mesh()
    else:
        _sizes(mesh)
    return jax.set_mesh(mesh)


_BOUND = {}  # mesh -> its axis sizes: a mesh is bound once, not on every call


def _sizes(mesh):
    """Axis sizes from `mesh`, or for jax.devices() when it is None."""
    key = ("devices", jax.device_count()) if mesh is None else mesh
    try:
        return _BOUND[key]
    except (KeyError, TypeError):  # TypeError: a mesh-like object that cannot be hashed
        pass
    sizes = _bind_sizes(mesh)
    try:
        if len(_BOUND) < 64:
            _BOUND[key] = sizes
    except TypeError:
        pass
    return sizes


def _bind_sizes(mesh):
    if mesh is None:
        return _bind(jax.device_count())
    names = tuple(mesh.axis_names)
    if sorted(names) != sorted(MESH_AXES):
        raise ValueError(f"the mesh has axes {names}, but the plan has {MESH_AXES}; "
                         "build it with make_mesh()")
    expected = _bind(int(mesh.devices.size))
    wrong = [f"`{n}` is {mesh.shape[n]} in the mesh but {expected[n]} in the plan"
             for n in MESH_AXES if mesh.shape[n] != expected[n]]
    kinds = dict(zip(names, (str(t.name).lower() for t in mesh.axis_types)))
    wrong += [f"`{n}` is {kinds[n]} in the mesh but {t} in the plan"
              for n, t in zip(MESH_AXES, AXIS_TYPES) if kinds[n] != t]
    if wrong:
        raise ValueError("the mesh does not match the plan: " + "; ".join(wrong))
    return expected


# -- copied into emitted modules: runtime -------------------------------------------------

def _shape_of(shape):
    shape = tuple(shape)
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise ValueError(f"shape must hold non-negative integers, not {shape!r}")
    return tuple(int(d) for d in shape)


def partition_spec(path, shape, mesh=None):
    """The PartitionSpec of variable `path` of `shape`; ValueError if it has no valid
    layout. Without `mesh`, `auto` takes its size from jax.devices()."""
    shape = _shape_of(shape)
    entries, _, why = _resolve(RULES, DEFAULT, path, shape, _sizes(mesh))
    if why is not None:
        raise ValueError(why)
    return PartitionSpec(*entries)


# -- copied into emitted modules: runtime: shardings --

def shardings(tree, mesh=None):
    """A pytree of NamedSharding with `tree`'s structure (leaf path: keys joined by
    "/"). Every leaf's error is reported together, in one ValueError."""
    mesh = make_mesh() if mesh is None else mesh
    sizes = _sizes(mesh)
    try:  # one walk, each leaf answered as it is met
        return _mapped(tree, _quick(sizes, lambda entries: NamedSharding(
            mesh, PartitionSpec(*entries))))
    except _Unusual:  # a node it does not open, or an error: every error is said below
        pass
    leaves, treedef = _paths(tree)
    out, errors, made, shapes, fits = [], [], {}, {}, _fits(sizes)
    for path, leaf in leaves:
        entries, _, why = _resolve(RULES, DEFAULT, path, _shape_once(leaf, shapes), sizes,
                                   fits)
        if why is not None:
            errors.append(why)
        sharding = made.get(entries)
        if sharding is None:  # a model has a handful of distinct layouts
            sharding = made[entries] = NamedSharding(mesh, PartitionSpec(*entries))
        out.append(sharding)
    if errors:
        raise ValueError(f"plan {PLAN_NAME!r}: {len(errors)} variable(s) have no valid "
                         "layout:\n  " + "\n  ".join(errors))
    return jax.tree_util.tree_unflatten(treedef, out)


def shard(tree, mesh=None):
    """`tree` placed on the mesh as the plan lays it out; nothing moves on an error."""
    return jax.device_put(tree, shardings(tree, mesh))


# -- copied into emitted modules: runtime: data and activations --

def data_sharding(rank=2, mesh=None):
    """Dimension 0 over the batch axes, the other `rank - 1` dimensions not split."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"a batch needs rank >= 1, not {rank!r}")
    mesh = make_mesh() if mesh is None else mesh
    _sizes(mesh)
    batch = BATCH_AXES[0] if len(BATCH_AXES) == 1 else BATCH_AXES
    return NamedSharding(mesh, PartitionSpec(batch, *(None,) * (rank - 1)))


def output_sharding(path, rank, mesh=None):
    """The sharding of layer `path`'s output by the plan's `outputs` rules, or None when
    none matches. Only the rank must fit: XLA pads activations."""
    if not OUTPUT_RULES and OUTPUT_DEFAULT is None:
        return None
    mesh = make_mesh() if mesh is None else mesh
    sizes = _sizes(mesh)
    size = 1
    for n in sizes.values():
        size *= n
    size *= max(
        [block for _, alts in OUTPUT_RULES for alt in alts for _, block in alt[0] + alt[2]]
        + [block for alt in (OUTPUT_DEFAULT or ()) for _, block in alt[0] + alt[2]] + [1])
    entries, matched, why = _resolve(OUTPUT_RULES, OUTPUT_DEFAULT, path, (size,) * rank, sizes)
    if not matched:
        return None
    if why is not None:
        raise ValueError(why)
    return NamedSharding(mesh, PartitionSpec(*entries))


def _place(x, sharding):
    """`x` laid out as `sharding`: device_put outside a traced function; inside one,
    reshard over the spec's explicit axes, then with_sharding_constraint over its auto ones."""
    if not isinstance(x, jax.core.Tracer):
        return jax.device_put(x, sharding)
    mesh = sharding.mesh
    kinds = dict(zip(mesh.axis_names, (str(t.name).lower() for t in mesh.axis_types)))

    def only(kind):
        out = []
        for entry in sharding.spec:
            axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
            kept = tuple(a for a in axes if kinds.get(a) == kind)
            out.append(None if not kept else kept[0] if len(kept) == 1 else kept)
        return NamedSharding(mesh, PartitionSpec(*out))

    if "explicit" in kinds.values():
        if not hasattr(jax.sharding, "reshard"):
            raise RuntimeError(f"jax {jax.__version__} has no jax.sharding.reshard, which "
                               "explicit axes need; this module needs jax>=0.7.1")
        x = jax.sharding.reshard(x, only("explicit"))
    if "auto" in kinds.values():
        x = jax.lax.with_sharding_constraint(x, only("auto"))
    return x


def constrain(x, name, mesh=None):
    """`x` laid out by the `outputs` rule for `name`, inside or outside jit (reshard on
    explicit axes, with_sharding_constraint on auto ones). A shape the rule does not fit
    is a ValueError naming the rule; no rule for `name`: a warning, and `x` unchanged."""
    mesh = make_mesh() if mesh is None else mesh
    sizes = _sizes(mesh)
    shape = tuple(int(d) for d in x.shape)
    entries, matched, why = _resolve(OUTPUT_RULES, OUTPUT_DEFAULT, name, shape, sizes)
    if not matched:
        warnings.warn(f"plan {PLAN_NAME!r}: no `outputs` rule matches {name!r}; the value "
                      "is left as it is", stacklevel=2)
        return x
    if why is not None:
        raise ValueError(f"plan {PLAN_NAME!r}: the value does not fit its `outputs` rule: {why}")
    return _place(x, NamedSharding(mesh, PartitionSpec(*entries)))

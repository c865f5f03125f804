"""The runtime a plan with `state` rules or `on host` layouts adds to the module
`planc compile --target jax` writes: optimizer slots laid out by their parameter's
`state` rule, and shardings in pinned host memory.

Like `planc.targets.emit.runtime.for_jax`, its sections are copied into the emitted module,
read without being run, and call the resolver of `planc.targets.emit.runtime.resolve`.
`state: shardings` takes the place of that module's section `runtime: shardings`;
`state: activations` comes after its last section and wraps the functions defined there.
A module without state rules or host layouts carries neither, and stays byte for byte
what it always was. The constants below stand for a plan with no state rules and nothing
on host; the emitted module defines its own.

Slots follow planc's one rule (`planc.targets.emit.runtime.tree._owners`, which planc's
JAX target calls too): an optimizer leaf takes the layout of its parameter's `state` rule,
or the parameter's own where no state rule matches; any other leaf is replicated in
device memory.
"""

from __future__ import annotations

import jax
from jax.sharding import NamedSharding, PartitionSpec

from planc.targets.emit.runtime.for_jax import (PLAN_NAME, _shape_of, _sizes, constrain,
                                                make_mesh, output_sharding)
from planc.targets.emit.runtime.resolve import (DEFAULT, OUTPUT_DEFAULT, OUTPUT_RULES, OVERLAP,
                                                RULES, _fit, _fits, _hits, _matcher, _resolve)
from planc.targets.emit.runtime.tree import _owners, _paths, _shape_once, _stray

HOST_RULES: tuple = ()
DEFAULT_ON_HOST = False
OUTPUT_HOST_RULES: tuple = ()
OUTPUT_DEFAULT_ON_HOST = False
STATE_RULES: tuple = ()
STATE_DEFAULT = None
STATE_HOST_RULES: tuple = ()
STATE_DEFAULT_ON_HOST = False

# -- copied into emitted modules: state: shardings --

_PINNED_HOST = "pinned_host"


def _rule_index(rules, path):
    """The index of the rule that lays out `path` as `_resolve` decides it, or -1 when
    none matches it."""
    test, literals, found = _matcher(rules)
    index = literals.get(path)
    if index is not None:
        return index
    hits = _hits(test, found, path)
    return hits[0] if hits else -1


def _on_host(rules, path):
    """Whether the rule of `rules` (RULES or OUTPUT_RULES) that lays out `path`, or the
    default where none matches, places it in pinned host memory."""
    host, default = ((HOST_RULES, DEFAULT_ON_HOST) if rules is RULES
                     else (OUTPUT_HOST_RULES, OUTPUT_DEFAULT_ON_HOST))
    if not host and not default:  # nothing of these rules is on host: no match needed
        return False
    index = _rule_index(rules, path)
    return default if index < 0 else index in host


def _slots(path, shape, sizes):
    """(entries, on host, error) of the optimizer slots of parameter `path` of `shape` by
    the state rules, or None when none matches it (the slots mirror the parameter)."""
    replicated = tuple(None for _ in shape)
    test, literals, found = _matcher(STATE_RULES)
    index = literals.get(path)
    if index is None:
        hits = _hits(test, found, path)
        if not hits:
            if STATE_DEFAULT is None:
                return None
            entries, why = _fit("default", STATE_DEFAULT, path, shape, sizes)
            return (entries or replicated), STATE_DEFAULT_ON_HOST, _of_slots(why)
        if len(hits) > 1 and OVERLAP == "error":
            names = ", ".join(repr(STATE_RULES[i][0]) for i in hits)
            return replicated, False, (f"the optimizer slots of `{path}` match {len(hits)} "
                                       f"state rules: {names}")
        index = hits[0]
    pattern, alternatives = STATE_RULES[index]
    entries, why = _fit(pattern, alternatives, path, shape, sizes)
    return (entries or replicated), index in STATE_HOST_RULES, _of_slots(why)


def _of_slots(why):
    return None if why is None else f"the optimizer slots of {why}"


def _require_host(mesh):
    """RuntimeError unless the mesh's devices address pinned host memory."""
    device = mesh.devices.flat[0]
    memories = getattr(device, "addressable_memories", None)
    kinds = [] if memories is None else [m.kind for m in memories()]
    if _PINNED_HOST not in kinds:
        raise RuntimeError(f"plan {PLAN_NAME!r} places layouts `on host`, but the "
                           f"{device.platform} devices have no {_PINNED_HOST!r} memory "
                           f"(jax {jax.__version__}: {kinds or 'no memory kinds'})")


def _variable(path, shape, sizes, errors, fits):
    """(entries, on host) of variable `path` by the layout rules; its error appended.
    `fits` is `_resolve`'s (`_fits`)."""
    entries, _, why = _resolve(RULES, DEFAULT, path, shape, sizes, fits)
    if why is not None:
        errors.append(why)
    return entries, _on_host(RULES, path)


def shardings(tree, mesh=None, params=None):
    """A pytree of NamedSharding with `tree`'s structure (leaf path: keys joined by "/").
    With `params`, the leaves are optimizer state: each takes its parameter's slot layout
    (the state rules, else the parameter's own); a leaf of no parameter is replicated.
    A layout `on host` is in pinned host memory. Every leaf's error is reported together,
    in one ValueError."""
    mesh = make_mesh() if mesh is None else mesh
    sizes = _sizes(mesh)
    leaves, treedef = _paths(tree)
    errors, shapes, fits = [], {}, _fits(sizes)
    if params is None:
        answers = [_variable(path, _shape_once(leaf, shapes), sizes, errors, fits)
                   for path, leaf in leaves]
    else:
        param_leaves = _paths(params)[0]
        own = []
        for path, leaf in param_leaves:
            shape = _shape_once(leaf, shapes)
            answer = _variable(path, shape, sizes, errors, fits)
            slots = _slots(path, shape, sizes)
            if slots is not None:
                answer = slots[:2]
                if slots[2] is not None:
                    errors.append(slots[2])
            own.append(answer)
        owners, ambiguous = _owners(tree, params, leaves, param_leaves)
        stray = _stray(owners, leaves, param_leaves)
        if stray is not None:
            errors.append(f"optimizer leaf {stray!r} mirrors no parameter, and neither does "
                          "any other: pass the parameters this state belongs to")
        errors += [f"optimizer leaf {path!r} could mirror any of the parameters "
                   f"{', '.join(map(repr, names))}: pass the parameters whose tree the "
                   "state mirrors, or rename them apart" for path, names in ambiguous]
        answers = [own[i] if i is not None else
                   (tuple(None for _ in _shape_once(leaf, shapes)), False)
                   for i, (_, leaf) in zip(owners, leaves)]
    if errors:
        raise ValueError(f"plan {PLAN_NAME!r}: {len(errors)} variable(s) have no valid "
                         "layout:\n  " + "\n  ".join(errors))
    if any(host for _, host in answers):
        _require_host(mesh)
    made, out = {}, []
    for entries, host in answers:
        sharding = made.get((entries, host))
        if sharding is None:  # a model has a handful of distinct layouts
            spec = PartitionSpec(*entries)
            sharding = made[(entries, host)] = (
                NamedSharding(mesh, spec, memory_kind=_PINNED_HOST) if host
                else NamedSharding(mesh, spec))
        out.append(sharding)
    return jax.tree_util.tree_unflatten(treedef, out)


def shard(tree, mesh=None, params=None):
    """`tree` placed on the mesh as the plan lays it out (with `params`, as their
    optimizer state); nothing moves on an error."""
    return jax.device_put(tree, shardings(tree, mesh, params))


# -- copied into emitted modules: state: activations --

# The activation functions above know no memory kind: these wrap them.
_device_output_sharding, _device_constrain = output_sharding, constrain


def output_sharding(path, rank, mesh=None):
    """The sharding of layer `path`'s output by the plan's `outputs` rules (in pinned host
    memory where the rule says `on host`), or None when none matches."""
    sharding = _device_output_sharding(path, rank, mesh)
    if sharding is None or not _on_host(OUTPUT_RULES, path):
        return sharding
    _require_host(sharding.mesh)
    return NamedSharding(sharding.mesh, sharding.spec, memory_kind=_PINNED_HOST)


def constrain(x, name, mesh=None):
    """`x` laid out by the `outputs` rule for `name` (see the module's `constrain`), then
    moved to pinned host memory where the rule says `on host`: inside jit a memory kind
    is a placement of its own, not a constraint."""
    placed = _device_constrain(x, name, mesh)
    if not _on_host(OUTPUT_RULES, name):
        return placed
    mesh = make_mesh() if mesh is None else mesh
    _require_host(mesh)
    entries, _, _ = _resolve(OUTPUT_RULES, OUTPUT_DEFAULT, name, _shape_of(x.shape),
                             _sizes(mesh))
    return jax.device_put(placed, NamedSharding(mesh, PartitionSpec(*entries),
                                                memory_kind=_PINNED_HOST))

"""The Keras target: a plan as `keras.distribution` objects.

Every layout comes from `planc.resolve.Resolver`, the one matching engine; Keras's own
regex lookup is never used, so the answers do not depend on the installed Keras's regex
mode (<= 3.13 searches, >= 3.14 full-matches) and equal the JAX target's on every
variable. The `Plan` facade calls these functions with its IR (`plan.device_mesh`,
`plan.layout_map`, `plan.to_keras()`, `plan.activate()`).

Choices a user should know:

- **Mesh.** `plan.device_mesh` holds the devices of `plan.mesh()` (the JAX target) in
  the same order, so both targets place every shard on the same device.
- **Two namespaces.** Keras looks up variables (`dense/kernel`) and layer outputs
  (`dense/output`) in one LayoutMap. planc keeps them apart: a variable is resolved
  against the `layout` rules only, an output against the `outputs` rules only (matched
  against the layer path, the `/output` suffix stripped).
- **Bookkeeping variables.** Variables created by an optimizer (`adam/iteration`), a
  metric (`loss/total`) or a seed generator (`seed_generator_state`) are not model
  variables: they stay replicated whatever the rules say. Optimizer slots
  (`adam/dense_kernel_momentum`) take their parameter's layout, which Keras does itself
  (`add_variable_from_reference` passes the parameter's layout), so a plan's `state`
  rules cannot reach them: such a plan is refused (P311 at each state rule), as is a
  layout `on host` (a `TensorLayout` has no memory kind). Use the JAX target for both.
- **Errors first.** A variable whose resolution has an error (no fitting layout, an
  indivisible dimension, an ambiguous match, an unmatched variable of rank >= 2)
  raises `PlanError` naming the variable and the rule's line when Keras creates it,
  before JAX or XLA sees the layout. A batch the batch axes do not divide raises
  P312 before JAX's `IndivisibleError`.
- **Beyond TensorLayout.** A dimension split over several axes, or a batch split over
  several axes, is a `TensorLayout` that Keras's own validation would refuse: under the
  JAX backend planc hands Keras a `TensorLayout` subclass whose backend layout is the
  `NamedSharding` `P(("a", "b"), ...)`; under any other backend it is P311, naming
  the rule.
- **Lookup by path alone.** `layout_map["dense/kernel"]` (what a stock Keras
  `ModelParallel` asks) cannot choose between alternatives that depend on the shape;
  such a rule raises P311 there. `layout_map[variable]`, `layout_map.lookup(path,
  shape)` and the distribution from `plan.to_keras()` pass the shape and always answer.

The objects built carry the plan as `.plan`: `plan_of(bound_ir)` when the caller passes
`plan_of` (the facade passes `Plan`), else the bound IR.
"""

from __future__ import annotations

import contextlib
import math

from planc.check.binding import bind_devices
from planc.ir import PlanIR
from planc.targets.expressible import check_expressible
from planc.targets.keras.classes import classes
from planc.targets.keras.env import backend_name, keras_module, require_distribution_support

__all__ = ["device_mesh", "layout_map", "to_keras", "activate"]


def _mesh_and_ir(ir: PlanIR, devices=None):
    """(DeviceMesh, `ir` bound to its device count). Under JAX the devices are those of
    the JAX target's mesh, in its order."""
    kd = keras_module().distribution
    if backend_name() == "jax":
        from planc.targets.jax.sharding import make_mesh

        jax_mesh = make_mesh(ir, devices)
        grid = jax_mesh.devices
        mesh = kd.DeviceMesh(shape=tuple(int(s) for s in grid.shape),
                             axis_names=list(jax_mesh.axis_names), devices=grid)
        return mesh, bind_devices(ir, int(grid.size))
    require_distribution_support()
    listed = list(kd.list_devices() if devices is None else devices)
    bound = bind_devices(ir, len(listed))
    return kd.DeviceMesh(shape=tuple(bound.mesh.shape), axis_names=list(bound.mesh.names),
                         devices=listed), bound


def _plan(bound: PlanIR, plan_of):
    return bound if plan_of is None else plan_of(bound)


def device_mesh(ir: PlanIR, devices=None):
    """A `keras.distribution.DeviceMesh` for the plan, devices in the JAX target's order.

    `auto` takes the devices the other axes leave (default: every device JAX sees);
    a count that does not fit raises `PlanError` (P201).
    """
    return _mesh_and_ir(ir, devices)[0]


def layout_map(ir: PlanIR, devices=None, *, mesh=None, plan_of=None):
    """A `PlancLayoutMap` (a `keras.distribution.LayoutMap`) for the plan.

    Its lookups are planc's resolution; see `PlancLayoutMap`. Pass `mesh` to share a
    `DeviceMesh` built by `device_mesh(ir)`.
    """
    check_expressible(ir, backend_name())
    if mesh is None:
        mesh, bound = _mesh_and_ir(ir, devices)
    else:
        bound = bind_devices(ir, int(math.prod(mesh.shape)))
    return classes().PlancLayoutMap(bound, mesh, _plan(bound, plan_of))


def to_keras(ir: PlanIR, devices=None, *, plan_of=None):
    """`DataParallel` for a data-parallel plan on a 1-D mesh, else `ModelParallel`.

    Both are planc subclasses (`PlancDataParallel`, `PlancModelParallel`) that carry
    the plan as `.plan`. Keras's `DataParallel` breaks on a mesh of several axes, so a
    data-parallel plan over such a mesh becomes a `ModelParallel` with no rules whose
    batch is split over every axis.
    """
    check_expressible(ir, backend_name())
    mesh, bound = _mesh_and_ir(ir, devices)
    made = classes()
    plan = _plan(bound, plan_of)
    if bound.distribution == "data_parallel" and len(bound.mesh.names) == 1:
        return made.PlancDataParallel(bound, mesh, plan)
    return made.PlancModelParallel(made.PlancLayoutMap(bound, mesh, plan))


@contextlib.contextmanager
def activate(ir: PlanIR, devices=None, *, plan_of=None):
    """The Keras distribution scope of `to_keras(ir)`; yields the distribution.

    Variables created inside are laid out by the plan; the previous distribution is
    restored on exit.
    """
    dist = to_keras(ir, devices, plan_of=plan_of)
    with dist.scope():
        yield dist

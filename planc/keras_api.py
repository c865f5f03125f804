"""planc's counterparts of the module-level functions of `keras.distribution`.

    planc.set_distribution(plan)        # keras.distribution.set_distribution(...)
    planc.distribution().plan           # the active planc distribution's (bound) plan
    planc.set_distribution(None)        # back to a single device

Each function takes a `Plan` where Keras takes a `Distribution`, and returns Keras's own
objects, so planc and plain Keras code can be mixed. Keras is imported on first call;
without it, each raises ModuleNotFoundError with the one line that says how to install
it.
"""

from __future__ import annotations

__all__ = ["set_distribution", "distribution", "list_devices", "distribute_tensor"]


def _keras():
    from planc.targets.keras.env import keras_module

    return keras_module()


def set_distribution(plan, devices=None):
    """Make `plan` the global Keras distribution; returns the Keras distribution.

    `plan` may be a planc `Plan` (turned into `plan.to_keras(devices)`), a Keras
    `Distribution` (set as it is) or None (clears the global distribution). Variables
    created afterwards are laid out by it, as after `keras.distribution.set_distribution`.
    """
    from planc.plan import Plan

    keras = _keras()
    if isinstance(plan, Plan):
        from planc.targets.keras.distribution import to_keras

        value = to_keras(plan.ir, devices, plan_of=Plan)
    elif plan is None or _is_distribution(keras, plan):
        if devices is not None:
            raise TypeError("`devices` applies only when a planc Plan is given")
        value = plan
    else:
        raise TypeError(f"set_distribution takes a planc Plan, a Keras Distribution or None, "
                        f"not {type(plan).__name__}")
    keras.distribution.set_distribution(value)
    return value


def _is_distribution(keras, obj) -> bool:
    kd = keras.distribution
    base = getattr(kd, "Distribution", None)
    if base is not None:
        return isinstance(obj, base)
    return isinstance(obj, (kd.DataParallel, kd.ModelParallel))


def distribution():
    """The active Keras distribution (`keras.distribution.distribution()`), or None.

    One built by planc carries its plan as `.plan`.
    """
    return _keras().distribution.distribution()


def list_devices(device_type: str | None = None) -> list[str]:
    """The devices Keras distributes over (`keras.distribution.list_devices`), e.g.
    `["cpu:0", ..., "cpu:7"]`; `device_type` is "cpu", "gpu" or "tpu"."""
    return list(_keras().distribution.list_devices(device_type))


def distribute_tensor(x, layout):
    """`x` laid out as `layout` (`keras.distribution.distribute_tensor`).

    `layout` is what Keras accepts (a `TensorLayout`, or a backend layout such as a JAX
    `Sharding`, `jax.experimental.layout.Format` or `Layout`, handed to Keras as it is),
    or the axes of one, e.g. `("batch", None)` or `(("data", "model"), None)`, or a
    `planc.resolve.ResolvedLayout`: axes are laid out on the mesh of the active
    distribution. Inside a jitted function this is a sharding constraint; outside, the
    tensor is moved. A symbolic Keras tensor (functional model construction) is
    returned as it is, as Keras does.
    """
    from planc.resolve import ResolvedLayout

    keras = _keras()
    kd = keras.distribution
    if isinstance(layout, (tuple, list, str, ResolvedLayout)):
        layout = _layout_from_axes(kd, layout)
    return kd.distribute_tensor(x, layout)


def _layout_from_axes(kd, layout):
    from planc.resolve import ResolvedLayout
    from planc.targets.keras.classes import tensor_layout

    axes = layout.axes if isinstance(layout, ResolvedLayout) else layout
    if isinstance(axes, str) or not isinstance(axes, (tuple, list)):
        raise TypeError(f"layout must be a TensorLayout, a jax Sharding or a tuple of axes "
                        f"like ('batch', None), not {layout!r}")
    active = kd.distribution()
    if active is None:
        raise ValueError("a layout given as axes needs an active distribution for its mesh: "
                         "call it inside `with plan.activate():`, or pass a TensorLayout")
    mesh = active.device_mesh
    names = set(mesh.axis_names)
    for entry in axes:
        for name in (entry if isinstance(entry, (tuple, list)) else (entry,)):
            if name is not None and name not in names:
                raise ValueError(f"layout {tuple(axes)!r} names axis {name!r}, which the "
                                 f"active mesh {tuple(mesh.axis_names)} does not have")
    return tensor_layout(tuple(tuple(e) if isinstance(e, list) else e for e in axes), mesh)

"""The runtime of the module `planc compile --target keras` writes: its public functions.

The emitted module carries a verbatim copy of the section below its marker line (after
the binding of `planc.targets.emit.runtime.binding`, the device order of
`planc.targets.devices` and the distribution check of `planc.targets.emit.runtime.keras_support`), and runs where
planc is not installed. So the code there uses only Keras (and jax, on the JAX backend, for the device order), the names imported
here (which the emitted module imports or carries too) and the emitted module's
constants, which stand here for a plan of one `auto` axis and no rules.

Writing a module reads this file without running it (`planc.targets.emit.codegen`), so
`planc compile --target keras` works where Keras is not installed.
"""

from __future__ import annotations

import keras
from keras import distribution as kd

from planc.targets.devices import _device_grid
from planc.targets.emit.runtime.binding import _bind
from planc.targets.emit.runtime.keras_support import _require_distribution

MESH_AXES: tuple = ("batch",)
SLICES: tuple = (1,)
BATCH_AXES: tuple = ("batch",)
DISTRIBUTION = "model_parallel"
VARIABLE_LAYOUTS: dict = {}
OUTPUT_LAYOUTS: dict = {}

# -- copied into emitted modules: runtime -------------------------------------------------


def _devices(devices):
    if devices is None:
        if keras.backend.backend() == "jax":
            import jax

            return list(jax.devices())
        return list(kd.list_devices())
    if hasattr(devices, "ravel"):
        devices = devices.ravel().tolist()
    devices = list(devices)
    if not devices:
        raise ValueError("no devices given")
    return devices


def device_mesh(devices=None):
    """A DeviceMesh over `devices` (default: every device), `auto` resolved.

    On the JAX backend the devices are placed as planc's JAX target places them. A
    backend without Keras's distribution API is a RuntimeError: Keras would take the
    plan's layouts there and ignore them.
    """
    _require_distribution(keras)
    devices = _devices(devices)
    sizes = _bind(len(devices))
    shape = tuple(sizes[n] for n in MESH_AXES)
    if keras.backend.backend() == "jax" and not any(isinstance(d, str) for d in devices):
        devices = _device_grid(shape, SLICES, devices)
    return kd.DeviceMesh(shape=shape, axis_names=list(MESH_AXES), devices=devices)


def _layout_map(layouts, mesh):
    _require_distribution(keras)
    out = kd.LayoutMap(device_mesh() if mesh is None else mesh)
    for key, axes in layouts.items():
        out[key] = axes
    return out


def layout_map(mesh=None):
    """A LayoutMap of VARIABLE_LAYOUTS on `mesh` (default: device_mesh())."""
    return _layout_map(VARIABLE_LAYOUTS, mesh)


def output_map(mesh=None):
    """A LayoutMap of OUTPUT_LAYOUTS ("<layer path>/output" keys) on `mesh`."""
    return _layout_map(OUTPUT_LAYOUTS, mesh)


class PlanModelParallel(kd.ModelParallel):
    """ModelParallel whose layer outputs are looked up in OUTPUT_LAYOUTS alone (Keras
    would look them up in the variable map), whose scalars (optimizer step, metric
    totals) stay replicated, and whose variable layouts have one entry per dimension."""

    def __init__(self, mesh):
        # `device_mesh=` is what Keras 3.0-3.3 require and what later versions ignore.
        super().__init__(device_mesh=mesh, layout_map=layout_map(mesh),
                         batch_dim_name=BATCH_AXES[0])
        self._output_map = output_map(mesh)

    def get_variable_layout(self, variable):
        if getattr(variable, "_layout", None) is not None:
            return variable._layout
        rank = len(variable.shape)
        if rank == 0:
            return kd.TensorLayout((), self.device_mesh)
        layout = super().get_variable_layout(variable)
        # `replicated` and `(model, ...)` keys hold fewer axes than the rank: the rest
        # are not split, as planc writes them out.
        axes = tuple(layout.axes)
        if len(axes) < rank:
            layout = kd.TensorLayout(axes + (None,) * (rank - len(axes)), self.device_mesh)
        return layout

    def get_tensor_layout(self, path):
        return self._output_map[path]


def distribution(devices=None):
    """DataParallel for a data-parallel plan, else PlanModelParallel."""
    mesh = device_mesh(devices)
    if DISTRIBUTION == "data_parallel":
        return kd.DataParallel(device_mesh=mesh)
    return PlanModelParallel(mesh)

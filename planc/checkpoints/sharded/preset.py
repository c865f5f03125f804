"""`plan.from_preset`: a keras-hub preset loaded straight into the plan's shards.

keras-hub's own ``from_preset`` under ``ModelParallel`` gives every variable its initial
value and then reads each tensor whole before Keras lays it out, so the host holds the
model about twice over (keras #21634). Here the order is:

1. The preset is found (a local directory, or a handle keras-hub resolves to one), its
   ``config.json`` read and its class checked against the one asked for (P420, P422),
   its weights found (P421) and opened from their headers (P410-P413).
2. The model is built by keras-hub's ``from_preset(..., load_weights=False)`` under the
   plan's distribution with every variable unborn (`planc.sources.preset.unborn_model`):
   shapes, dtypes and paths, no values.
3. `planc.checkpoints.sharded.load` pairs the datasets with the variables as Keras's
   own saving walk names them and resolves every layout: a missing or mis-shaped
   tensor, a variable no rule places, raises one `PlanError` before any data is read.
   Each device's slice is then read from the file into its shard.
4. Each variable takes its Keras layout from the plan's distribution and its array,
   already laid out so, becomes its value; a variable still without a value after that
   is an error naming it (P423), never a layer left silently empty.
"""

from __future__ import annotations

import os

from planc.checkpoints.sharded.load import load
from planc.checkpoints.tensors import CheckpointError, open_checkpoint
from planc.diagnostics import PlanError, error
from planc.ir import PlanIR
from planc.sources.preset import (
    CONFIG_FILE, PresetError, check_class, preset_config, preset_weights, unborn_model,
)
from planc.targets.keras.distribution import activate

__all__ = ["from_preset"]


def from_preset(ir: PlanIR, cls: type, preset, *, plan_of=None, dtype=None,
                strict: bool = False, **kwargs):
    """`cls`'s model from `preset`, each variable holding its shards of the preset's
    weights in the plan's layout; see `planc.Plan.from_preset`."""
    if not hasattr(cls, "from_preset"):
        raise TypeError(f"{getattr(cls, '__name__', cls)!r} has no from_preset: pass a "
                        f"keras-hub model class, such as keras_hub.models.GemmaBackbone")
    directory = _directory(preset)
    try:
        check_class(directory, preset_config(directory), cls)
        weights = preset_weights(directory)
    except PresetError as e:
        raise _error(ir, e.code, str(e)) from None
    try:
        checkpoint = open_checkpoint(weights)
    except CheckpointError as e:
        raise _error(ir, e.code, str(e)) from None
    try:
        with activate(ir, plan_of=plan_of) as distribution:
            # keras-hub builds from `preset` itself, so that a handle stays a handle.
            model = unborn_model(cls, os.fspath(preset), **kwargs)
            load(ir, checkpoint, model, dtype=dtype, strict=strict,
                 mesh=distribution.device_mesh.backend_mesh, assign=_born)
        unfilled = [v.path for v in model.variables if v._value is None]
        if unfilled:
            raise _error(ir, "P423", f"{weights}: {len(unfilled)} variable(s) of the model "
                                     f"were left without a value, first `{unfilled[0]}`")
    finally:
        checkpoint.close()
    return model


def _directory(preset) -> str:
    """The local directory of `preset`: itself, or where keras-hub puts a handle's files."""
    if isinstance(preset, os.PathLike) or os.path.isdir(str(preset)):
        return os.fspath(preset)
    from keras_hub.src.utils.preset_utils import get_file

    return os.path.dirname(get_file(preset, CONFIG_FILE))


def _born(model, variables, arrays) -> None:
    """Each unborn variable takes its layout from the active distribution (the plan's)
    and its array, laid out so already, as its value: nothing is copied, and nothing
    holds a value to put back should one fail."""
    for v in variables:
        v._initialize_layout()
        v.assign(arrays[v.path])
        v._initializer = None


def _error(ir: PlanIR, code: str, message: str) -> PlanError:
    help_ = _HELP.get(code)
    return PlanError((error(code, message, None, help=(help_,) if help_ else ()),),
                     ir.source_dict)


_HELP = {
    "P420": "call from_preset on the class the preset's config.json names, or one of its "
            "base classes (keras_hub.models.Backbone)",
    "P421": "save the model with save_to_preset, which writes model.weights.h5 (or "
            "model.weights.json and its parts)",
    "P422": "import the package that defines the class before loading, or save the "
            "preset again with save_to_preset",
    "P423": "make the layer's save_own_variables and load_own_variables cover every "
            "variable it creates",
}

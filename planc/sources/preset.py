"""Keras presets: a directory keras-hub's ``save_to_preset`` wrote, read as a model.

A preset holds ``config.json`` (the model, as ``keras.saving.serialize_keras_object``
writes it: a ``registered_name`` and a ``config``), ``metadata.json``, the weights
(``model.weights.h5``, or ``model.weights.json`` and the ``.weights.h5`` shards it names
when the model was saved in parts) and any assets. The model is built from its
``config.json`` by keras-hub's own ``from_preset(..., load_weights=False)``, so its
config handling (dtype policies, keyword overrides) is keras-hub's, inside a
``keras.StatelessScope`` that leaves every variable unborn: its shape, dtype and path
exist, its value does not, and nothing of the model's size is allocated. `planc lint
--checkpoint PRESET` and `planc inspect PRESET` read the variables so;
`plan.from_preset` then gives each its shards (`planc.targets.keras.preset`).

Nothing here imports keras or keras-hub until a preset is built.
"""

from __future__ import annotations

import os
from typing import Any

from planc.sources.model import Model, SourceError
from planc.sources.headers import read_json_file, shown

__all__ = ["PresetError", "CONFIG_FILE", "is_preset", "preset_config", "preset_weights",
           "preset_class", "unborn_model", "model_of_preset"]

CONFIG_FILE = "config.json"
# keras-hub's names (`keras_hub.src.utils.preset_utils`): one file, or an index of parts.
WEIGHTS_FILE = "model.weights.h5"
SHARDED_WEIGHTS_FILE = "model.weights.json"


class PresetError(SourceError):
    """A preset that cannot be loaded as asked; `code` is its diagnostic (P420-P422, and
    P411 for weights a link leads out of it)."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


def is_preset(path: str | os.PathLike) -> bool:
    """Whether `path` is a directory with a preset's ``config.json``."""
    path = os.fspath(path)
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, CONFIG_FILE))


def preset_config(path: str | os.PathLike) -> dict:
    """The preset's ``config.json``, checked to be a serialised Keras object (P422)."""
    where = os.path.join(os.fspath(path), CONFIG_FILE)
    config = read_json_file(where)
    if (not isinstance(config, dict) or not isinstance(config.get("registered_name"), str)
            or not isinstance(config.get("config"), dict)):
        raise PresetError(f"{where}: not a Keras preset's config: no 'registered_name' "
                          f"and 'config' of a serialised Keras object", "P422")
    return config


def preset_weights(path: str | os.PathLike) -> str:
    """The preset's weights: ``model.weights.h5``, else ``model.weights.json``; P421
    when it has neither, P411 when a link leads the one found out of the preset."""
    path = os.fspath(path)
    for name in (WEIGHTS_FILE, SHARDED_WEIGHTS_FILE):
        candidate = os.path.join(path, name)
        if os.path.isfile(candidate):
            # The shards `model.weights.json` names are refused when a link leads them
            # out of the preset (P411); the weights file itself takes the same policy.
            real_base = os.path.realpath(path)
            if os.path.commonpath([real_base, os.path.realpath(candidate)]) != real_base:
                raise PresetError(f"{candidate} is a link that leads outside the preset's "
                                  "directory; a preset's weights lie inside it, and planc "
                                  "does not open it", "P411")
            return candidate
    raise PresetError(f"{path}: a preset without weights: neither {WEIGHTS_FILE} nor "
                      f"{SHARDED_WEIGHTS_FILE} is in it", "P421")


def preset_class(path: str | os.PathLike, config: dict) -> type:
    """The class ``config.json`` names, as keras-hub finds it (keras-hub's classes
    registered first); P422 when no class is registered under that name."""
    import keras
    import keras_hub  # noqa: F401  (registers keras-hub's classes with Keras)

    name = config["registered_name"]
    if name in ("Functional", "Sequential"):
        return keras.Model
    found = keras.saving.get_registered_object(name)
    if not isinstance(found, type):
        where = os.path.join(os.fspath(path), CONFIG_FILE)
        raise PresetError(f"{where}: names the class `{shown(name)}`, which no installed "
                          f"package registers with Keras", "P422")
    return found


def check_class(path: str | os.PathLike, config: dict, cls: type) -> type:
    """The preset's class, which must be `cls` or a subclass of it (P420), as
    keras-hub's ``from_preset`` requires."""
    found = preset_class(path, config)
    if not (isinstance(cls, type) and issubclass(found, cls)):
        where = os.path.join(os.fspath(path), CONFIG_FILE)
        asked = getattr(cls, "__name__", repr(cls))
        raise PresetError(f"{where}: names the class `{found.__name__}`, which is not a "
                          f"`{asked}`", "P420")
    return found


def unborn_model(cls: type, preset: str, **kwargs: Any):
    """`cls.from_preset(preset, load_weights=False, **kwargs)` with every variable unborn
    (shape, dtype, path and layout known, no value), under whatever distribution is
    active. Keras would give such variables their initial values when the scope ends or
    when one is first used; they are taken off its list of variables to initialise, so
    they stay unborn until assigned."""
    import keras
    from keras.src.backend.common import global_state

    with keras.StatelessScope(initialize_variables=False):
        model = cls.from_preset(preset, load_weights=False, **kwargs)
    ours = {id(v) for v in model.variables}
    pending = global_state.get_global_attribute("uninitialized_variables")
    if pending:
        pending[:] = [v for v in pending if id(v) not in ours]
    return model


def model_of_preset(path: str | os.PathLike, *, weights_names: bool = False) -> Model:
    """The variables of the preset at `path`, from its ``config.json``, built unborn; with
    `weights_names`, the datasets its weights file holds them under."""
    from planc.sources.objects import model_of_object

    path = os.fspath(path)
    config = preset_config(path)
    preset_weights(path)  # a preset without weights is no model to check a plan against
    cls = preset_class(path, config)
    if not hasattr(cls, "from_preset"):
        raise PresetError(f"{os.path.join(path, CONFIG_FILE)}: names `{cls.__name__}`, "
                          f"which has no from_preset; save the model with keras-hub's "
                          f"save_to_preset", "P422")
    return model_of_object(unborn_model(cls, path), path, weights_names=weights_names)

"""Model sources: everything planc validates a plan against, reduced to variables.

`load_variables(source)` turns any supported source into a tuple of
`planc.variables.Variable(path, shape, dtype)`, in the source's own order:

=====================================  =============================================
source                                 read as
=====================================  =============================================
``x.safetensors``                      its header only, in header order
``x.safetensors.index.json``           each shard's header, in ``weight_map`` order
``x.npz``                              each member's ``.npy`` header only
``x.json``                             a planc manifest (see `planc.sources.manifest`)
                                       or, if it has a ``weight_map``, an index
a directory                            its ``model.safetensors.index.json`` or
                                       ``model.safetensors`` (a Hugging Face layout)
a Keras preset directory               the model its ``config.json`` describes, built
                                       with no variable allocated (`preset`)
``"module:attr"``                      import ``module`` (the current directory is
                                       searched first) and read ``attr``; a
                                       zero-argument callable is evaluated with
                                       `jax.eval_shape`, so nothing is allocated
a Keras model                          ``variable.path`` of each of ``.variables``
a pytree                               keys joined by "/" (see `planc.sources.objects`)
a list of `Variable`                   as given, checked
=====================================  =============================================

A string names a file if such a file exists, else it must look like ``module:attr``.
Dtypes become numpy-style names ("float32", "bfloat16", "float8_e4m3fn"); see
`normalize_dtype`. Every variable has a non-empty path, a shape of non-negative
integers and a known dtype; a source with no variables, or with two variables of one
path, is an error. Every failure is a `SourceError` with a one-line message that names
the source and says why; nothing else escapes `load_variables`.

`load_model(source, weights_names=True)` gives the variables in a `Model` record, with
the datasets a Keras model's ``save_weights`` writes them under (`keras_weights`), so
`planc lint --checkpoint` pairs a ``.weights.h5`` with the model as `plan.load` does.

Nothing here imports jax or keras at module level: jax is imported only to evaluate a
callable, and Keras models are read by duck typing.
"""

from __future__ import annotations

import os

from planc.gc_pause import collector_paused
from planc.lazy import lazy_face
from planc.variables import Variable
from planc.sources.model import Model, SourceError, finish, normalize_dtype, one_line
from planc.sources.headers import (
    read_json_file, read_npz, read_safetensors, variables_from_index,
)
from planc.sources.manifest import (
    MANIFEST_VERSION, manifest_text, read_manifest, variables_from_manifest, write_manifest,
)

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Read only for the sources that need them: a file's lint imports neither (~1.5 ms).
__getattr__ = lazy_face(__name__, {
    "is_preset": "planc.sources.preset", "model_of_preset": "planc.sources.preset",
    "is_module_attr": "planc.sources.module_attr",
    **dict.fromkeys(("model_of_module_attr", "model_of_object", "variables_of_module_attr",
                     "variables_of_object"), "planc.sources.objects")})

__all__ = [
    "SourceError", "Model", "load_model", "load_variables", "normalize_dtype",
    "write_manifest", "read_manifest", "manifest_text", "MANIFEST_VERSION",
]


def load_variables(source: Any) -> tuple[Variable, ...]:
    """The variables of `source` (a file, ``"module:attr"``, a Keras model or a pytree).

    See the module docstring for what each kind of source gives. Raises `SourceError`
    (and only that) when the source cannot be read or understood.
    """
    return load_model(source).variables


def load_model(source: Any, *, weights_names: bool = False) -> Model:
    """`source`'s variables as a `Model`; with `weights_names`, a Keras model's also
    names the datasets its ``save_weights`` writes. Raises `SourceError` as
    `load_variables` does."""
    try:
        with collector_paused():  # a Variable and its shape per leaf, none in a cycle
            if isinstance(source, (str, os.PathLike)):
                return _load_named(source, weights_names)
            from planc.sources.objects import model_of_object

            return model_of_object(source, weights_names=weights_names)
    except SourceError:
        raise
    except RecursionError:
        raise SourceError(f"{_name(source)}: nested too deeply to read") from None
    except Exception as e:
        # A reader bug or an exotic object must still reach the user as one line.
        raise SourceError(f"{_name(source)}: cannot read: {one_line(e)}") from None


def _name(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return type(source).__name__


def _load_named(source: str | os.PathLike, weights_names: bool) -> Model:
    path = os.fspath(source)
    if isinstance(source, str) and not os.path.exists(path):
        from planc.sources.module_attr import is_module_attr
        from planc.sources.objects import model_of_module_attr

        if is_module_attr(path):
            return model_of_module_attr(path, weights_names=weights_names)
    if os.path.isdir(path):  # a preset is a directory: a file's lint needs no reader of one
        from planc.sources.preset import is_preset, model_of_preset

        if is_preset(path):
            return model_of_preset(path, weights_names=weights_names)
    return Model(_load_path(source, path))


def _load_path(source: str | os.PathLike, path: str) -> tuple[Variable, ...]:
    if os.path.isdir(path):
        return _load_directory(path)
    if not os.path.exists(path):
        if isinstance(source, str) and ":" in path:
            raise SourceError(f"{path}: no such file, and not a module:attr reference")
        raise SourceError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise SourceError(f"{path}: not a regular file")
    return _load_file(path)


def _load_directory(path: str) -> tuple[Variable, ...]:
    for name in ("model.safetensors.index.json", "model.safetensors"):
        candidate = os.path.join(path, name)
        if os.path.isfile(candidate):
            return _load_file(candidate)
    raise SourceError(f"{path}: a directory without model.safetensors.index.json or "
                      f"model.safetensors; name the checkpoint file")


def _load_file(path: str) -> tuple[Variable, ...]:
    lower = path.lower()
    if lower.endswith(".safetensors"):
        return finish(read_safetensors(path), path)
    if lower.endswith(".npz"):
        return finish(read_npz(path), path)
    if lower.endswith(".json"):
        data = read_json_file(path)
        if isinstance(data, dict) and "planc_manifest" in data:
            return variables_from_manifest(data, path)
        if isinstance(data, dict) and "weight_map" in data:
            base = os.path.dirname(os.path.abspath(path))
            return finish(variables_from_index(data, base, path), path)
        raise SourceError(f"{path}: neither a planc manifest (no 'planc_manifest' key) nor "
                          f"a safetensors index (no 'weight_map' key)")
    ext = os.path.splitext(path)[1] or "(no extension)"
    raise SourceError(f"{path}: unsupported file type {ext}; planc reads .safetensors, "
                      f".safetensors.index.json, .npz and planc manifest .json files")

"""Which dataset of a Keras ``.weights.h5`` holds which variable of a model.

Keras writes a weights file by walking the model (`keras.src.saving.saving_lib`'s
``_save_state``): each layer, sublayer or other saveable found by that walk calls its
own ``save_own_variables(store)``, which puts each variable under a key of the store
for the object's place in the walk (``layers/dense/vars/0``). Rather than reimplement
that walk, planc runs Keras's own, with a store that writes nothing and records which
variable object went under which name: so a model maps onto its file exactly as its
``save_weights`` lays the file out, subclassed layers and custom
``save_own_variables`` included. Values handed to the store that are not the model's
variables (optimizer slots, computed arrays) name datasets that loading leaves alone.

The walk runs where the model is at hand (`planc.sources.load_model` for `planc lint
--checkpoint`, `plan.load(..., like=model)`); what it found is plain data,
`WeightsNames`, which `planc.checkpoints.binding.bind_checkpoint` reads for both, so
lint and load pair a file's datasets with the model's variables the same way.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["WeightsNames", "weights_names", "is_keras_layer"]


class WeightsNames(NamedTuple):
    """What a Keras model's ``save_weights`` writes, by dataset name.

    `paths`: dataset -> the path of the model variable it holds. `others`: datasets of
    other values the walk writes (computed arrays). `prefixes`: the prefixes of the
    datasets of state a load never touches (the optimizer's slots).

    >>> names = WeightsNames({"layers/dense/vars/0": "dense/kernel"}, frozenset(), ("optimizer/",))
    >>> names.stored_as("layers/dense/vars/0"), names.stored_as("optimizer/vars/0")
    ('dense/kernel', None)
    """

    paths: dict
    others: frozenset
    prefixes: tuple

    def stored_as(self, dataset: str) -> str | None:
        """The path the model knows `dataset` by: its variable's path, the dataset's own
        name when the walk writes no such dataset, or None for one a load leaves alone."""
        if dataset in self.others or dataset.startswith(self.prefixes):
            return None
        return self.paths.get(dataset, dataset)


def is_keras_layer(obj) -> bool:
    """Whether `obj` is a Keras 3 layer or model (Keras is imported already if it is)."""
    import sys

    keras = sys.modules.get("keras")
    layer = getattr(keras, "Layer", None) if keras is not None else None
    return isinstance(layer, type) and isinstance(obj, layer)


def weights_names(model) -> WeightsNames:
    """The datasets ``model.save_weights`` writes, from Keras's own saving walk.

    Nothing is read or converted: the variables are only recorded, by identity.
    """
    from keras.src.saving import saving_lib

    class _Recorder(saving_lib.H5IOStore):
        # Subclassed so that `_save_state`'s type check accepts it; nothing of the
        # parent's file handling runs.
        def __init__(self):
            self.names: dict[int, str] = {}
            self.others: set[str] = set()
            self._at = ""

        def __bool__(self):
            return True

        def make(self, path, metadata=None):
            self._at = path
            return self

        def __setitem__(self, key, value):
            name = f"{self._at}/vars/{key}" if self._at else f"vars/{key}"
            if id(value) in wanted:
                self.names.setdefault(id(value), name)
            else:
                self.others.add(name)

        def close(self):
            pass

    variables = list(model.variables)
    wanted = {id(v) for v in variables}
    store = _Recorder()
    # An optimizer's save_own_variables copies its slots to the host; they are not
    # loaded, so the walk skips it and its datasets are set aside by their prefix.
    skipped, prefixes = set(), []
    for attr in ("optimizer",):
        found = getattr(model, attr, None)
        if found is not None and not isinstance(found, (str, bool)):
            skipped.add(id(found))
            prefixes.append(f"{attr}/")
    saving_lib._save_state(model, weights_store=store, assets_store=None, inner_path="",
                           visited_saveables=skipped)
    paths = {store.names[id(v)]: v.path for v in variables if id(v) in store.names}
    return WeightsNames(paths, frozenset(store.others), tuple(prefixes))

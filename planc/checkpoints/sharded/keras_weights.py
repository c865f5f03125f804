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
"""

from __future__ import annotations

__all__ = ["dataset_names", "KerasView"]


def dataset_names(model) -> tuple[dict[int, str], set[str], tuple[str, ...]]:
    """``({id(variable): dataset name}, {names of other datasets the walk writes},
    (prefixes of the optimizer's datasets,))``.

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

    wanted = {id(v) for v in model.variables}
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
    return store.names, store.others, tuple(prefixes)


class KerasView:
    """An h5 checkpoint as a Keras model sees it: each dataset that holds one of the
    model's variables is named by that variable's path; datasets of other state the
    model writes (its optimizer's) are hidden; anything else keeps its name."""

    def __init__(self, checkpoint, model):
        from planc.checkpoints.tensors import Tensor

        names, others, prefixes = dataset_names(model)
        by_dataset = {}
        for v in model.variables:
            name = names.get(id(v))
            if name is not None:
                by_dataset[name] = v.path
        self.base = checkpoint
        self.kind = checkpoint.kind
        self.path = checkpoint.path
        self._original: dict[str, str] = {}
        tensors = []
        for t in checkpoint.tensors:
            if t.name in others or t.name.startswith(prefixes):
                continue
            name = by_dataset.get(t.name, t.name)
            self._original[name] = t.name
            tensors.append(Tensor(name, t.shape, t.dtype, t.file))
        self.tensors = tuple(tensors)

    @property
    def bytes_read(self) -> int:
        return self.base.bytes_read

    def read(self, name, index):
        return self.base.read(self._original.get(name, name), index)

    def close(self) -> None:
        self.base.close()

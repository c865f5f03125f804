"""What Keras's distribution API needs, as the Keras target (`planc.targets.keras`) and
the module `planc compile --target keras` writes (a verbatim copy of the section below)
both check it: the code uses only the `keras` it is given.
"""

from __future__ import annotations

# Keras looks up a layer's output layout under "<layer path>/output".
OUTPUT_SUFFIX = "/output"

# -- copied into emitted modules: distribution support ------------------------------------


def _has_distribution_support():
    try:
        from keras.src import backend as keras_backend
    except ImportError:  # a Keras laid out differently: let Keras itself say what fails
        return True
    return getattr(keras_backend, "distribution_lib", None) is not None


def _require_distribution(keras):
    """RuntimeError unless `keras`'s distribution API runs on its backend.

    Keras releases whose backend has no `distribution_lib` accept a LayoutMap and ignore
    it, so every layout would be silently dropped. On the torch backend it says which
    Keras would run it (`keras.src.backend.torch.distribution_lib`, keras-team/keras#23418,
    in no release up to 3.15) and where planc places torch parameters itself."""
    if _has_distribution_support():
        return
    backend = keras.backend.backend()
    version = getattr(keras, "__version__", "?")
    if backend == "torch":
        raise RuntimeError(f"Keras {version} has no distribution API on the `torch` backend: "
                           "it needs a Keras whose torch backend has "
                           "`keras.src.backend.torch.distribution_lib` (keras-team/keras#23418, "
                           "in no release up to 3.15). Set KERAS_BACKEND=jax before keras is "
                           "imported, or place the torch model's parameters with planc's torch "
                           "target: `plan.distribute_module(module)`, `planc compile --target "
                           "torch`")
    raise RuntimeError(f"Keras's distribution API does not run on the `{backend}` backend: "
                       "set KERAS_BACKEND=jax before keras is imported")

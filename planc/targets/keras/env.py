"""Keras as planc finds it: the import, with the one line that says how to install it,
and which backend it runs on.

Keras is an optional dependency (`pip install 'planc[keras]'`): nothing imports it
until a Keras call is made, and everything else works without it. The module `planc
compile --target keras` writes carries a verbatim copy of the section below its marker
line (read without running this module), so it refuses a backend without Keras's
distribution API as the Keras target does: that code uses only the `keras` it is given.
"""

from __future__ import annotations

__all__ = ["INSTALL_HINT", "keras_module", "backend_name", "require_distribution_support"]

INSTALL_HINT = "planc's Keras target needs Keras 3: pip install 'planc[keras]'"


def keras_module():
    """`keras`, or ModuleNotFoundError with the one line that says how to install it.

    When Keras is not imported yet and no backend is chosen, the JAX backend is chosen:
    it is the one on which every layout planc writes can run (Keras's own default,
    TensorFlow, cannot split a dimension over several axes).
    """
    import os
    import sys

    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", "jax")
    try:
        import keras
        import keras.distribution  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "keras":
            raise ModuleNotFoundError(INSTALL_HINT) from None
        raise ModuleNotFoundError(f"Keras cannot load its backend: {exc}") from None
    return keras


def backend_name() -> str:
    """The backend Keras runs on: "jax", "tensorflow", "torch", "numpy"."""
    return keras_module().backend.backend()


def require_distribution_support() -> None:
    """Raise RuntimeError when Keras's distribution API does not run on its backend."""
    _require_distribution(keras_module())


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

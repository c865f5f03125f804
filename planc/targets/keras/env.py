"""Keras as planc finds it: the import, with the one line that says how to install it,
and which backend it runs on.

Keras is an optional dependency (`pip install 'planc[keras]'`): nothing imports it
until a Keras call is made, and everything else works without it. The check that Keras's
distribution API runs on its backend is the emitted Keras module's own
(`planc.targets.emit.runtime.keras_support`), so both refuse the same backends.
"""

from __future__ import annotations

from planc.targets.emit.runtime.keras_support import _require_distribution

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

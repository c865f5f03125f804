"""planc: a compiler for sharding plans.

    >>> import planc
    >>> plan = planc.loads('mesh(batch = auto)\\ndata_parallel')
    >>> plan.distribution_kind
    'data_parallel'

Front-end only at import time: jax and keras load when a backend is first used.
"""

from planc._version import __version__
from planc.diagnostics import CODES, Diagnostic, PlanError, Severity, Span
from planc.plan import Plan, load_plan, loads
from planc.variables import Variable

# The Keras counterparts (`keras.distribution.set_distribution` ...) load keras, so they
# are imported on first use only.
_KERAS_API = ("set_distribution", "distribution", "list_devices", "distribute_tensor")

__all__ = [
    "CODES", "Diagnostic", "Plan", "PlanError", "Severity", "Span", "Variable",
    "load_plan", "loads", "__version__", *_KERAS_API,
]


def __getattr__(name):
    if name in _KERAS_API:
        from planc import keras_api

        return getattr(keras_api, name)
    raise AttributeError(f"module 'planc' has no attribute {name!r}")

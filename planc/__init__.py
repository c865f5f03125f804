"""planc: a compiler for sharding plans.

    >>> import planc
    >>> plan = planc.loads('mesh(batch = auto)\\ndata_parallel')
    >>> plan.distribution_kind
    'data_parallel'

Front-end only at import time: jax and keras load when a backend is first used. Importing
planc changes nothing of the process (no signal handler, no argparse): the command line's
start-up tricks live in its entry point, `planc.cli`.
"""

# Each public name loads its module on first use: `import planc` costs a few
# milliseconds, and a command line (`planc lint`) loads only the stages it runs. The
# Keras counterparts (`keras.distribution.set_distribution` ...) load keras, so they
# too wait for first use. The version too: this file runs before the command line's
# entry point can set its Ctrl-C handler, so it reads no other file.
_LAZY = {
    "__version__": "planc._version",
    "CODES": "planc.diagnostics", "Diagnostic": "planc.diagnostics",
    "PlanError": "planc.diagnostics", "InputError": "planc.diagnostics",
    "SourceError": "planc.sources.model", "CheckpointError": "planc.checkpoints.tensors",
    "ClusterError": "planc.multihost.spec", "Severity": "planc.diagnostics",
    "Span": "planc.diagnostics", "Plan": "planc.plan", "load_plan": "planc.plan",
    "loads": "planc.plan", "Variable": "planc.variables",
}
_KERAS_API = ("set_distribution", "distribution", "list_devices", "distribute_tensor")

__all__ = [
    "CODES", "CheckpointError", "ClusterError", "Diagnostic", "InputError", "Plan",
    "PlanError", "Severity", "SourceError", "Span", "Variable",
    "load_plan", "loads", "__version__", *_KERAS_API,
]


def __getattr__(name):
    from planc.lazy import import_module, lazy_face  # here: this file reads no other

    if name in _KERAS_API:  # looked up in keras_api on every call
        return getattr(import_module("planc.keras_api"), name)
    return lazy_face(__name__, _LAZY)(name)


def __dir__():
    return sorted(set(globals()) | set(__all__))

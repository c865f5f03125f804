"""planc: a compiler for sharding plans.

    >>> import planc
    >>> plan = planc.loads('mesh(batch = auto)\\ndata_parallel')
    >>> plan.distribution_kind
    'data_parallel'

Front-end only at import time: jax and keras load when a backend is first used.
"""

import sys as _sys

if _sys.argv[:1] == ["-m"] or _sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1] in (
        "planc", "planc.exe"):
    # The command line (`python -m planc`, the `planc` script): Ctrl-C while the
    # modules below load ends it quietly, with the shell's code, instead of in a
    # traceback. `planc.cli.dispatch.main` puts Python's own handler back.
    # `_signal`, the built-in half of `signal`: importing `signal` itself builds its enums,
    # long enough for a Ctrl-C to land in the middle of it.
    import _signal
    import os as _os

    def _interrupted_at_start(signum, frame):
        _os.write(2, b"planc: interrupted\n")
        _os._exit(128 + signum)

    _signal.signal(_signal.SIGINT, _interrupted_at_start)

from planc._version import __version__

# Each public name loads its module on first use: `import planc` costs a few
# milliseconds, and a command line (`planc lint`) loads only the stages it runs. The
# Keras counterparts (`keras.distribution.set_distribution` ...) load keras, so they
# too wait for first use.
_LAZY = {
    "CODES": "planc.diagnostics", "Diagnostic": "planc.diagnostics",
    "PlanError": "planc.diagnostics", "InputError": "planc.diagnostics",
    "SourceError": "planc.sources._common", "CheckpointError": "planc.checkpoints.tensors",
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
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _KERAS_API:
        from planc import keras_api

        return getattr(keras_api, name)
    raise AttributeError(f"module 'planc' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))

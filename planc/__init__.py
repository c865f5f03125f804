"""planc: a compiler for sharding plans.

    >>> import planc
    >>> plan = planc.loads('mesh(batch = auto)\\ndata_parallel')
    >>> plan.distribution_kind
    'data_parallel'

Front-end only at import time: jax and keras load when a backend is first used.
"""

from .diagnostics import CODES, Diagnostic, PlanError, Severity, Span
from .plan import Plan, load_plan, loads
from .variables import Variable

__version__ = "0.1.0"

__all__ = [
    "CODES", "Diagnostic", "Plan", "PlanError", "Severity", "Span", "Variable",
    "load_plan", "loads", "__version__",
]

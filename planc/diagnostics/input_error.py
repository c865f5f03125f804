"""`InputError`: the one base of every error planc raises about what it was given.

A plan with errors (`PlanError`), a model source that cannot be read (`SourceError`), a
checkpoint that cannot be opened (`CheckpointError`), cluster settings that cannot
start a cluster (`ClusterError`), a golden document that is not one (`GoldenError`), a
source `planc import` cannot read (`SourceProblem`): each derives from `InputError`,
so a caller that hands planc user input catches one class. It is a `ValueError`, as
Keras and JAX raise for a bad argument, so `except ValueError` catches them too.
Anything else escaping planc is a bug in planc, not in the input.

>>> import planc
>>> try:
...     planc.loads("data_parallel").validate({"w": "not an array"})
... except planc.InputError as e:
...     print(type(e).__name__)
SourceError
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """Something wrong with a plan, a model, a checkpoint or settings planc was given."""

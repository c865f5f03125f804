"""Which variables, and which plan rules, a collective moves: the bottleneck in the plan's
words.

A collective's results on one device have a shape. A parameter laid out over the
collective's axes explains it when that shape is the parameter's shard with those axes
gathered back (all-gather), or the shard itself (reduce-scatter, all-reduce of its
gradient), allowing for a scanned stack (one layer of the stacked dimension) and for the
transposed layout XLA may give a gradient. Several parameters of one shape are all named;
a collective that no parameter explains (activations, a loss) names none, and says so.
"""

from __future__ import annotations

__all__ = ["explain"]


def _axes_of(entry) -> tuple:
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def _gathered(p, axes) -> tuple:
    """`p`'s shard with the dimensions split over `axes` whole again."""
    return tuple(full if set(_axes_of(e)) & set(axes) else part
                 for full, part, e in zip(p.shape, p.shard, p.spec))


def _same(dims: tuple, shape: tuple) -> bool:
    """`dims` is `shape`, one layer of it (a scanned stack), or either transposed."""
    for candidate in (shape, shape[1:], (1,) + shape[1:]):
        if dims == candidate or (len(dims) == len(candidate) and sorted(dims) == sorted(candidate)
                                 and len(dims) > 1):
            return True
    return False


def explain(collective, parameters) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(variable paths, rule labels) behind `collective`, each in parameter order."""
    axes = tuple(collective.axes or ())
    if not axes:
        return (), ()
    users = [p for p in parameters if any(set(_axes_of(e)) & set(axes) for e in p.spec)]
    if collective.kind in ("all-reduce", "all-to-all", "collective-permute"):
        users = users or [p for p in parameters]
    found = []
    for p in (users if collective.kind != "all-reduce" else parameters):
        target = _gathered(p, axes) if collective.kind == "all-gather" else p.shard
        if any(_same(tuple(dims), target) for dims in collective.shapes):
            found.append(p)
    rules = tuple(dict.fromkeys(p.rule for p in found if p.rule))
    return tuple(p.path for p in found), rules

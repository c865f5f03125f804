"""Which variables, and which plan rules, a collective moves: the bottleneck in the plan's
words.

A collective's results on one device have a shape. A parameter laid out over the
collective's axes explains it when that shape is the parameter's shard with those axes
gathered back (all-gather), the shard itself (reduce-scatter, all-reduce of its
gradient), or, for an all-reduce, the gradient whole over those axes: XLA sums the whole
gradient and slices its shard when it cannot make a reduce-scatter (a convert between the
sum and the slice, as when float32 weights are cast to bfloat16 in the step, stops it).
Allowing for a scanned stack (one layer of the stacked dimension) and for the transposed
layout XLA may give a gradient. Several parameters of one shape are all named;
a collective that no parameter explains (activations, a loss) names none, and says so.

Where no parameter has the collective's shape, one it is a reshape of explains it: XLA
moves a reshape across the collective, so a `(2400, 4000)` weight the step views as
`(8, 300, 4000)` is gathered as `f32[8,300,4000]`. A reshape here only splits or merges
neighbouring dimensions: the same elements, with every boundary of the coarser shape
one of the finer's.
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


def _reshaped(dims: tuple, shape: tuple) -> bool:
    """`dims` is `shape`, or one layer of it, with neighbouring dimensions split or merged.

    >>> _reshaped((8, 300, 4000), (2400, 4000)), _reshaped((4000, 2400), (2400, 4000))
    (True, False)
    """
    def bounds(d):
        out, n = set(), 1
        for x in d:
            if x != 1:
                n *= x
                out.add(n)
        return out

    mine = bounds(dims)
    for candidate in (shape, shape[1:]):
        theirs = bounds(candidate)
        if mine and max(mine) == max(theirs, default=0) and (mine <= theirs or theirs <= mine):
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
    for like in (_same, _reshaped):  # a reshape only where no shape is the same
        for p in (users if collective.kind != "all-reduce" else parameters):
            if collective.kind == "all-gather":
                targets = (_gathered(p, axes),)
            elif collective.kind == "all-reduce":
                targets = (p.shard, _gathered(p, axes))
            else:
                targets = (p.shard,)
            if any(like(tuple(dims), t) for dims in collective.shapes for t in targets):
                found.append(p)
        if found:
            break
    rules = tuple(dict.fromkeys(p.rule for p in found if p.rule))
    return tuple(p.path for p in found), rules

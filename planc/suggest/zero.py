"""ZeRO-1: optimizer slots split over the batch axis, where their parameters are not.

With `--state K` (1 + optimizer slots) the K - 1 slots of a parameter cost what the
parameter costs, at its layout, unless the plan lays them out itself (`state` rules).
Under tensor parallelism the batch axis (`data`) replicates every parameter, and so every
slot; splitting the slots over it too (ZeRO-1, MaxText's `shard_optimizer_over_data`)
divides the slots' bytes by its size, and the parameters stay as they are. `planc
suggest` offers it when a mesh fits the budget only that way.

A slot's layout is its parameter's with the batch axis added: on the largest dimension
the layout leaves whole that the axis divides, else together with the axes of a
dimension already split, when the product divides it. A parameter it cannot split keeps
its layout for its slots.

>>> zero1_layout((16, 48), (None, "model"), "data", {"data": 4, "model": 2})
('data', 'model')
>>> zero1_layout((6, 48), (None, "model"), "data", {"data": 4, "model": 2})
(None, ('model', 'data'))
"""

from __future__ import annotations

import math

from planc.variables import itemsize


def zero1_layout(shape: tuple[int, ...], layout: tuple, axis: str, sizes: dict) -> tuple:
    """The layout of the slots of a parameter of `shape` laid out as `layout`, split over
    `axis` too (see the module docstring)."""
    size = sizes[axis]
    if size <= 1 or any(axis in entry_axes(e) for e in layout):
        return layout
    free = sorted((d for d, e in enumerate(layout) if e is None),
                  key=lambda d: (-shape[d], d))
    for d in free:
        if shape[d] > 0 and shape[d] % size == 0:
            return layout[:d] + (axis,) + layout[d + 1:]
    for d, e in enumerate(layout):
        split = math.prod(sizes[a] for a in entry_axes(e))
        if e is not None and shape[d] > 0 and shape[d] % (split * size) == 0:
            return layout[:d] + (entry_axes(e) + (axis,),) + layout[d + 1:]
    return layout


def entry_axes(entry) -> tuple[str, ...]:
    """The axes of one layout entry: none, one name, or a tuple of names."""
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def slot_bytes(variables, slots, sizes: dict) -> int:
    """The bytes per device of one slot of every variable, each at its slot's layout."""
    total = 0
    for v, lay in zip(variables, slots):
        pieces = math.prod(sizes[a] for e in lay for a in entry_axes(e))
        total += math.ceil(math.prod(v.shape) // pieces * itemsize(v.dtype))
    return total

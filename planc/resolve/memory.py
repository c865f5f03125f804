"""The memory model: what the variables cost in total and on each device.

Memory figures assume what JAX does with an evenly divisible `NamedSharding`: every
device holds one shard of every variable, so the most loaded device holds the sum of
the shard sizes. Sub-byte dtypes count fractional bytes, rounded up per shard.
"""

from __future__ import annotations

import heapq
import math

from planc.frozen import Frozen
from planc.ir import PlanIR
from planc.variables import itemsize

_TOP = 5  # contributors listed in summaries and in the P309 help


def human_bytes(n: float | None) -> str:
    """`n` bytes in binary units with three significant digits.

    >>> human_bytes(512), human_bytes(1536), human_bytes(2 * 2**30), human_bytes(None)
    ('512 B', '1.50 KiB', '2.00 GiB', '?')
    """
    if n is None:
        return "?"
    if n < 1024:
        return f"{int(n)} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            break
    if value < 10:
        return f"{value:.2f} {unit}"
    if value < 100:
        return f"{value:.1f} {unit}"
    return f"{value:.0f} {unit}"


class MemorySummary(Frozen):
    """What the variables cost: in total, on the most loaded device, and ideally.

    `per_device_bytes`, `ideal_bytes` and `overhead` are None while an `auto` axis has
    no size. `overhead` is per-device over ideal: 1.0 is a perfect split, `devices`
    means everything is replicated.
    """

    variables: int
    total_bytes: int
    devices: int | None
    per_device_bytes: int | None
    ideal_bytes: float | None
    overhead: float | None
    largest_replicated: tuple[tuple[str, int], ...] = ()
    largest_per_device: tuple[tuple[str, int], ...] = ()
    state: int = 1
    budget_bytes: int | None = None

    def to_dict(self) -> dict:
        """The `MEMORY` JSON object of `planc.report/1` (see `planc.resolve.report`)."""
        return {
            "variables": self.variables,
            "total_bytes": self.total_bytes,
            "devices": self.devices,
            "per_device_bytes": self.per_device_bytes,
            "ideal_bytes": self.ideal_bytes,
            "overhead": None if self.overhead is None else round(self.overhead, 6),
            "state": self.state,
            "budget_bytes": self.budget_bytes,
            "largest_replicated": [{"path": p, "bytes": b} for p, b in self.largest_replicated],
            "largest_per_device": [{"path": p, "bytes_per_device": b}
                                   for p, b in self.largest_per_device],
        }


def shard_bytes(shard: tuple[int, ...], dtype: str) -> int:
    """The bytes of one shard of `shard` shape, rounded up for sub-byte dtypes."""
    n = 1
    for d in shard:
        n *= d
    return math.ceil(n * itemsize(dtype))


def memory_summary(ir: PlanIR, assignments, per_device, nbytes, replicated, total: int,
                   count: int | None, n_variables: int) -> MemorySummary:
    """The summary of `assignments` on `count` devices (None: unknown); `per_device`,
    `nbytes` and `replicated` run parallel to them, `total` is every variable's bytes."""
    known = bool(assignments) and None not in per_device
    most = sum(per_device) if known else None
    ideal = total / count if count else None
    overhead = (most / ideal) if (most is not None and ideal) else None
    copies = ()
    if count is None or count > 1:
        copies = _largest(assignments, [n if r else 0 for n, r in zip(nbytes, replicated)])
    budget = ir.budget
    return MemorySummary(n_variables, total, count, most, ideal, overhead,
                         copies, _largest(assignments, per_device),
                         budget.state if budget else 1,
                         budget.per_device if budget else None)


def _largest(assignments, values) -> tuple[tuple[str, int], ...]:
    """The `_TOP` largest (path, value) of the variables whose value is above 0 (None:
    unknown, left out), ties in model order."""
    # The top values first, without a (path, value) pair per variable.
    top = heapq.nlargest(_TOP, filter(None, values))
    top = [b for b in top if b > 0]
    picked = []
    # Each value above the smallest of the top has all its variables among them; of the
    # smallest, the first ones in model order are: `list.index` finds both at C speed.
    for value in sorted(set(top), reverse=True):
        i = -1
        for _ in range(top.count(value)):
            i = values.index(value, i + 1)
            picked.append(i)
    return tuple((assignments[i].variable.path, values[i]) for i in picked)

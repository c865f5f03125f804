"""The memory model: what the variables cost in total and on each device.

Memory figures assume what JAX does with an evenly divisible `NamedSharding`: every
device holds one shard of every variable, so the most loaded device holds the sum of
the shard sizes. Sub-byte dtypes count fractional bytes, rounded up per shard.

A plan with `state` rules or `on host` layouts (`PlanIR.itemised_memory`) is counted by
memory: each variable's shard, and the K - 1 optimizer slots of `budget(state = K)` each
at its slot's layout, go to device memory or, `on host`, to host memory
(`itemised_bytes`). Other plans keep the one figure they always had: the shards times K.
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
    # Itemised plans only (`itemised`): bytes per device in device memory and in host
    # memory, the K - 1 slots included (None while an `auto` size is unknown), the host
    # budget, and the largest contributors to each.
    itemised: bool = False
    device_bytes: int | None = None
    host_bytes: int | None = None
    host_budget_bytes: int | None = None
    largest_device: tuple[tuple[str, int], ...] = ()
    largest_host: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict:
        """The `MEMORY` JSON object of `planc.report/1` (see `planc.resolve.report`)."""
        kinds = {} if not self.itemised else {
            "device_bytes": self.device_bytes,
            "host_bytes": self.host_bytes,
            "host_budget_bytes": self.host_budget_bytes,
            "largest_device": [{"path": p, "bytes_per_device": b}
                               for p, b in self.largest_device],
            "largest_host": [{"path": p, "bytes_per_device": b} for p, b in self.largest_host],
        }
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
            **kinds,
        }


def shard_bytes(shard: tuple[int, ...], dtype: str) -> int:
    """The bytes of one shard of `shard` shape, rounded up for sub-byte dtypes."""
    n = 1
    for d in shard:
        n *= d
    return math.ceil(n * itemsize(dtype))


class ItemisedBytes(Frozen):
    """Per variable, parallel to the assignments: the bytes per device of one optimizer
    slot at its layout (`slot`), and of the variable with its K - 1 slots in device
    memory (`device`) and in host memory (`host`); None while an `auto` size is unknown.
    Empty for a plan whose memory is not itemised."""

    slot: tuple[int | None, ...] = ()
    device: tuple[int | None, ...] = ()
    host: tuple[int | None, ...] = ()


def itemised_bytes(ir: PlanIR, assignments, per_device, slots, sizes) -> ItemisedBytes:
    """The `ItemisedBytes` of `assignments`, whose shards take `per_device` bytes and whose
    slots are laid out as `slots` (assignments too, parallel to them) on mesh `sizes`."""
    k = ir.budget.state if ir.budget else 1
    slot_bytes, device, host = [], [], []
    for a, own, s in zip(assignments, per_device, slots):
        v = a.variable
        shard = s.layout.shard_shape(v.shape, sizes)
        one = None if shard is None else shard_bytes(shard, v.dtype)
        slot_bytes.append(one)
        if own is None or one is None:
            device.append(None)
            host.append(None)
            continue
        on_host = own if a.layout.host else 0
        slots_on_host = (k - 1) * one if s.layout.host else 0
        device.append(own - on_host + (k - 1) * one - slots_on_host)
        host.append(on_host + slots_on_host)
    return ItemisedBytes(tuple(slot_bytes), tuple(device), tuple(host))


def memory_summary(ir: PlanIR, assignments, per_device, nbytes, replicated, total: int,
                   count: int | None, n_variables: int,
                   kinds: ItemisedBytes | None = None, positions=None) -> MemorySummary:
    """The summary of `assignments` on `count` devices (None: unknown); `per_device`,
    `nbytes` and `replicated` run parallel to them, `total` is every variable's bytes.
    `kinds` itemises device and host memory (a plan with `state` or `on host` rules).
    `positions`, parallel too, is each variable's pipeline position (`stages`): a device
    holds the variables of its position only, so the most loaded is the heaviest
    position's."""
    known = bool(assignments) and None not in per_device
    most = _heaviest(per_device, positions) if known else None
    ideal = total / count if count else None
    overhead = (most / ideal) if (most is not None and ideal) else None
    copies = ()
    if count is None or count > 1:
        copies = _largest(assignments, [n if r else 0 for n, r in zip(nbytes, replicated)])
    budget = ir.budget
    summary = MemorySummary(n_variables, total, count, most, ideal, overhead,
                            copies, _largest(assignments, per_device),
                            budget.state if budget else 1,
                            budget.per_device if budget else None)
    if kinds is None:
        return summary
    device, host = list(kinds.device), list(kinds.host)
    return summary._replace(
        itemised=True,
        device_bytes=_heaviest(device, positions) if assignments and None not in device
        else None,
        host_bytes=_heaviest(host, positions) if assignments and None not in host else None,
        host_budget_bytes=budget.host if budget else None,
        largest_device=_largest(assignments, device), largest_host=_largest(assignments, host))


def _heaviest(values, positions) -> int:
    """The sum of `values`, or, by pipeline `positions`, the largest position's sum (a
    position of -1: on every position, as a variable stacked over the stages)."""
    if positions is None:
        return sum(values)
    sums: dict = {}
    everywhere = 0
    for v, p in zip(values, positions):
        if p == -1:
            everywhere += v
        else:
            sums[p] = sums.get(p, 0) + v
    return max(sums.values(), default=0) + everywhere


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

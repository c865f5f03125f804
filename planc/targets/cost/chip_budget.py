"""A plan's device budgets against the memory of the chip a topology is made of: P822.

`budget(per_device = SIZE)` and `budget(peak = SIZE)` are the plan's own promises, and
lint checks the variables against them. On a named TPU topology the chip's HBM bounds
both as well: a budget past it is one the plan could meet and still not fit. `planc lint
--topology`, `planc aot` and `planc cost` say so alike.
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, warning
from planc.ir import PlanIR
from planc.resolve import human_bytes
from planc.targets.aot.topology import Topology
from planc.targets.cost.chips import chip_for

__all__ = ["budget_past_chip", "budget_past_topology"]


def budget_past_chip(ir: PlanIR, topology: Topology) -> list[Diagnostic]:
    """P822 for each device budget of `ir` past what one device of `topology` holds;
    none on CPU devices or a chip planc has no figures for.

    >>> import planc
    >>> plan = planc.loads("mesh(data = auto)\\ndata_parallel\\nbudget(per_device = 40 GiB)")
    >>> v5e = Topology("v5e:2x4", "tpu", (), 1, "TPU v5 lite", 8, 1, False)  # as loaded
    >>> [d.code for d in budget_past_chip(plan.ir, v5e)]
    ['P822']
    """
    budget = ir.budget
    chip = chip_for(topology.device_kind) if topology.platform == "tpu" else None
    if budget is None or chip is None:
        return []
    holds = chip.hbm_usable
    out = []
    for name, size in (("per_device", budget.per_device), ("peak", budget.peak)):
        if size is not None and size > holds:
            out.append(warning(
                "P822", f"the budget's `{name}`, {human_bytes(size)}, is more than a "
                        f"{chip.name} device holds ({human_bytes(holds)} of HBM a program "
                        f"may use): the plan can keep to it and still not fit {topology.label}",
                budget.span,
                help=(f"a budget of at most {human_bytes(holds)}, or the topology the "
                      "budget was meant for",)))
    return out


def budget_past_topology(ir: PlanIR, name: str) -> list[Diagnostic]:
    """`budget_past_chip` on the topology named `name`, as the plan's `slices` make it;
    none where the name does not load (the compile says why, P801 or P802)."""
    from planc.targets.aot.feasibility import slice_count
    from planc.targets.aot.topology import TopologyError, load_topology

    if ir.budget is None:  # nothing to load the topology for before the compile does
        return []
    try:
        return budget_past_chip(ir, load_topology(name, slice_count(ir)))
    except TopologyError:
        return []

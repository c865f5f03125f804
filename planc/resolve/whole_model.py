"""What only the whole model shows: the `budget` (P309), large variables left replicated
(P310), and what an `auto` axis without a device count leaves unchecked (P202).

The resolver reports what is wrong with single variables and single rules (P301-P308);
`validate` adds these.
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, error, note, warning
from planc.diagnostics.text import counted
from planc.ir import PlanIR
from planc.resolve.resolution import Assignment
from planc.resolve.memory import MemorySummary, human_bytes
from planc.resolve.resolver import escape_string
from planc.variables import Variable

# A fully replicated variable at least this large, on more than one device, gets P310:
# 64 MiB is where replicating one tensor starts to cost real accelerator memory, and
# no norm scale or bias of a real model comes near it.
LARGE_REPLICATED_BYTES = 64 * 2**20


def budget_findings(ir: PlanIR, memory: MemorySummary) -> list[Diagnostic]:
    """P309 when the most loaded device, times the `budget`'s state, needs more than it;
    for an itemised plan, one P309 per budget (device memory, host memory) it is over."""
    budget = ir.budget
    if budget is None:
        return []
    if memory.itemised:
        return _itemised_budget_findings(budget, memory)
    if memory.per_device_bytes is None or budget.per_device is None:
        return []
    need = memory.per_device_bytes * budget.state
    if need <= budget.per_device:
        return []
    state = (f" x {budget.state} (parameters and optimizer state) = {human_bytes(need)}"
             if budget.state != 1 else "")
    top = ", ".join(f"`{p}` {human_bytes(b)}" for p, b in memory.largest_per_device)
    devices = f" on {counted(memory.devices, 'device')}" if memory.devices else ""
    return [error(
        "P309", f"the variables need {human_bytes(memory.per_device_bytes)} per device{state}"
        f"{devices}, over the budget of {human_bytes(budget.per_device)}", budget.span,
        label=f"{human_bytes(budget.per_device)} per device",
        help=(f"largest per device: {top}",
              "split these over more mesh axes, use more devices, or raise the budget"))]


def _itemised_budget_findings(budget, memory: MemorySummary) -> list[Diagnostic]:
    out = []
    slots = (f" with {memory.state - 1} optimizer slot{'s' if memory.state != 2 else ''} per "
             "parameter at their state layouts" if memory.state > 1 else "")
    devices = f" on {counted(memory.devices, 'device')}" if memory.devices else ""
    for kind, need, limit, top, span in (
            ("device", memory.device_bytes, budget.per_device, memory.largest_device,
             budget.span),
            ("host", memory.host_bytes, budget.host, memory.largest_host,
             budget.host_span or budget.span)):
        if need is None or limit is None or need <= limit:
            continue
        largest = ", ".join(f"`{p}` {human_bytes(b)}" for p, b in top)
        fix = ("split these over more mesh axes (their `state` rules too: ZeRO-1), move "
               "some `on host`, use more devices, or raise the budget" if kind == "device"
               else "split these over more mesh axes, keep some in device memory, or "
                    "raise the host budget")
        out.append(error(
            "P309", f"the variables{slots} need {human_bytes(need)} of {kind} memory per "
            f"device{devices}, over the {kind} budget of {human_bytes(limit)}", span,
            label=f"{human_bytes(limit)} of {kind} memory per device",
            help=(f"largest in {kind} memory per device: {largest}", fix)))
    return out


def large_replicated_findings(ir: PlanIR, assignments, nbytes, replicated,
                              count: int | None, sizes) -> list[Diagnostic]:
    """P310 for replicated variables of `LARGE_REPLICATED_BYTES` or more, one per rule."""
    # Under data_parallel replication is the declared strategy, not an oversight.
    if ir.distribution == "data_parallel" or (count is not None and count <= 1):
        return []
    groups: dict[str | None, list[Assignment]] = {}
    for a, n, r in zip(assignments, nbytes, replicated):
        if r and n >= LARGE_REPLICATED_BYTES:
            groups.setdefault((a.rule.where if a.rule else None), []).append(a)
    out = []
    on = ("the one device" if count == 1 else f"all {count} devices") if count else "every device"
    for members in groups.values():
        members.sort(key=lambda a: -a.variable.nbytes)  # stable: ties in model order
        a = members[0]
        v = a.variable
        rule = a.rule
        if rule is not None:
            span, label = rule.span, "replicates it"
            why = f"{rule.label} lays it out `{rule.layout.text}`"
        else:
            span, label = ir.layout_span or ir.mesh.span, "no rule here splits it"
            why = "no rule matches it"
        message = (f"`{v.path}` {list(v.shape)} ({human_bytes(v.nbytes)}) is replicated on "
                   f"{on}: {why}{_and_the_others(members, '')}")
        out.append(warning("P310", message, span, label=label, help=_split_help(v, ir, sizes),
                           variable=v.path, rule=rule.where if rule else None))
    return out


def _and_the_others(members: list[Assignment], what: str) -> str:
    """` (and WHAT3 more: `a`, `b`, `c`)`: the other variables of one P310's group, the
    first three named."""
    if len(members) <= 1:
        return ""
    others = [m.variable.path for m in members[1:]]
    shown = ", ".join(f"`{p}`" for p in others[:3]) + (" ..." if len(others) > 3 else "")
    return f" (and {what}{len(others)} more: {shown})"


def replicated_state_findings(ir: PlanIR, slots, nbytes, count: int | None,
                              sizes) -> list[Diagnostic]:
    """P310 for a `state` rule that replicates the optimizer slots of a variable of
    `LARGE_REPLICATED_BYTES` or more (each slot as large as its parameter), one per rule:
    the same layout on the parameter is P310, and the slots are K - 1 times its bytes."""
    if ir.distribution == "data_parallel" or (count is not None and count <= 1):
        return []
    state_rules = {id(r) for r in (*ir.state, ir.state_default) if r is not None}
    groups: dict[int, list[Assignment]] = {}
    for slot, n in zip(slots, nbytes):
        rule = slot.rule
        if rule is not None and id(rule) in state_rules and slot.layout.is_replicated and \
                n >= LARGE_REPLICATED_BYTES:
            groups.setdefault(id(rule), []).append(slot)
    on = ("the one device" if count == 1 else f"all {count} devices") if count else "every device"
    k = ir.budget.state - 1 if ir.budget is not None and ir.budget.state > 1 else None
    out = []
    for members in groups.values():
        members.sort(key=lambda a: -a.variable.nbytes)
        a = members[0]
        v, rule = a.variable, a.rule
        each = human_bytes(v.nbytes)
        slots_text = (f"the {k} optimizer slot{'s' if k != 1 else ''} of `{v.path}` "
                      f"{list(v.shape)} ({k} x {each}) are" if k else
                      f"the optimizer slots of `{v.path}` {list(v.shape)} ({each} each) are")
        message = (f"{slots_text} replicated on {on}: state rule {rule.label} lays them "
                   f"out `{rule.layout.text}`{_and_the_others(members, 'the slots of ')}")
        out.append(warning("P310", message, rule.span, label="replicates the slots",
                           help=_split_help(v, ir, sizes).replace(
                               "variables of", "optimizer slots of variables of"),
                           variable=v.path, rule=rule.where))
    return out


def _split_help(v: Variable, ir: PlanIR, sizes) -> str:
    base = (f"variables of {human_bytes(LARGE_REPLICATED_BYTES)} or more are worth "
            "splitting over a mesh axis")
    axes = sorted(((s, n) for n, s in sizes.items() if s and s > 1), key=lambda t: (-t[0], t[1]))
    batch = set(ir.batch_axes)
    # Prefer a model axis; a batch axis splits weights FSDP-style, which also works.
    axes.sort(key=lambda t: t[1] in batch)
    for size, name in axes:
        dims = sorted(range(v.rank), key=lambda k: -v.shape[k])
        for k in dims:
            if v.shape[k] % size == 0:
                entries = ["_"] * v.rank
                entries[k] = name
                return (f'{base}, e.g. `"{escape_string(v.path)}" -> ({", ".join(entries)})`')
    return base


def skipped_findings(ir: PlanIR, assignments, memory: MemorySummary) -> list[Diagnostic]:
    """P202: what could not be checked while an `auto` axis has no device count."""
    auto = ir.mesh.auto_axis
    if auto is None:
        return []
    skipped = []
    if any(auto.name in a.layout.mesh_axes() for a in assignments):
        skipped.append(f"divisibility of the dimensions split over `{auto.name}`")
    if memory.per_device_bytes is None:
        skipped.append("the per-device memory" + (" and the `budget`" if ir.budget else ""))
    checks = [c for c in ir.checks if auto.name in c.names]
    if checks:
        skipped.append(f"{len(checks)} `check`{'s' if len(checks) > 1 else ''} reading "
                       f"`{auto.name}`")
    if not skipped:
        skipped.append("the ideal per-device memory and the replication overhead")
    return [note("P202", f"`{auto.name}` is `auto` and no device count was given: skipped "
                 + _and(skipped), auto.span, label="size unknown",
                 help="pass --devices N (or `devices=N` to `validate`) to check them")]


def _and(items: list[str]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]

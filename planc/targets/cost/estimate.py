"""`cost_of(aot_report)`: the `CostReport` of a step `planc aot` compiled, from the same
compile: no second trace, lower or compile.

The chip is the topology's (`TPU v5 lite` is the table's `v5e`); a `cpu:N` compile has
none, and is priced as `chip=` (default `v5e`), one chip per device, its figures marked
an estimate. Diagnostics: P812 (a calibration file for another chip, or malformed), P813
(the estimate exceeds `budget(step)`), P823 (a budget met only by a lower bound), P814 (a
loop whose trip count is unknown: every figure a lower bound), P824 (an op XLA:TPU could
not estimate: the upper bound unknown), P815 (no chip to price the step on), P821
(transfers to and from host memory, and work XLA runs on the host: not priced).
"""

from __future__ import annotations

from planc.diagnostics import PlanError, error, note, warning
from planc.targets.cost.attribution import explain
from planc.targets.cost.calibration import CalibrationError, calibration_for
from planc.targets.cost.chips import DEFAULT_CPU_CHIP, chip_to_price
from planc.targets.cost.counting import count
from planc.targets.cost.links import axis_placements
from planc.targets.cost.lower_bound import budget_on_lower_bound
from planc.targets.cost.model import bounds, terms
from planc.targets.cost.report import CostReport, seconds_text

__all__ = ["cost_of", "DEFAULT_CPU_CHIP"]


def cost_of(ir, aot_report, *, calibration: str | None = None, chip: str | None = None) -> CostReport:
    """The predicted step time of `aot_report`'s compile (see the module docstring)."""
    program = aot_report.program
    row = _chip(ir, aot_report, chip)
    try:
        cal = calibration_for(calibration, row.name)
    except CalibrationError as exc:
        raise PlanError((exc.diagnostic,), ir.source_dict) from None
    counts = count(program.hlo)
    placements = axis_placements(program.mesh, program.slice_axes, row.wraparound_from)
    all_terms = terms(counts, aot_report.collectives, row, cal, placements)
    for t in all_terms:
        if t.collective is not None:
            t.variables, t.rules = explain(t.collective, program.parameters)
    lower, upper, estimate = bounds(all_terms, cal)
    budget = ir.budget.step if ir.budget is not None else None
    diagnostics = list(aot_report.diagnostics)
    if not counts.exact:
        diagnostics.append(note(
            "P814", f"{len(counts.unknown_loops)} loop(s) of the compiled step have a trip "
                    "count planc cannot read; each is counted once, so FLOPs, bytes and "
                    "times are lower bounds", ir.anchor,
            help="a `jax.lax.scan` or `fori_loop` with a fixed length is read exactly; "
                 "a `while_loop` whose end depends on values is not"))
    if counts.unestimated:
        diagnostics.append(_unestimated(ir, counts, budget, estimate))
    if counts.host_bytes or counts.host_calls:
        diagnostics.append(_host_unpriced(ir, counts))
    if budget is not None and estimate > budget:
        diagnostics.append(error(
            "P813", f"the predicted step time {seconds_text(estimate)} on {aot_report.topology} "
                    f"exceeds `budget(step = {seconds_text(budget)})`", ir.budget.span or ir.anchor,
            label="this budget",
            help=_budget_help(all_terms, upper)))
    diagnostics += budget_on_lower_bound(ir, estimate, counts.exact, aot_report.topology,
                                         counts.unknown_loops)
    return CostReport(
        plan=ir.name, topology=aot_report.topology, chip=row.name, devices=aot_report.devices,
        estimate=aot_report.estimate, exact=counts.exact, unknown_loops=counts.unknown_loops,
        lower_s=lower, upper_s=upper, estimate_s=estimate, peak_flops=row.peak_flops("bf16"),
        counts=counts, terms=all_terms, placements=placements, calibration=cal,
        budget_step=budget, aot=aot_report, diagnostics=tuple(diagnostics),
        sources=aot_report.sources)


def _unestimated(ir, counts, budget, estimate):
    ops = counts.unestimated
    met = (f"; `budget(step = {seconds_text(budget)})` is not known to be met"
           if budget is not None and estimate <= budget else "")
    return warning(
        "P824", f"XLA:TPU could not estimate {len(ops)} op(s) of the step ({ops[0]}"
                + (f", and {len(ops) - 1} more" if len(ops) > 1 else "")
                + "); planc prices them by their bytes and FLOPs, which may be far below "
                  f"their time, so the step's upper bound is unknown{met}", ir.anchor,
        help="measure the step on the chip; for a long sequence's attention, a fused "
             "kernel (Pallas splash or flash attention) avoids XLA's whole T x T softmax")


def _host_unpriced(ir, counts):
    from planc.resolve import human_bytes

    calls = (f" and runs {counts.host_calls} computation(s) on the host"
             if counts.host_calls else "")
    return warning(
        "P821", f"the step moves {human_bytes(counts.host_bytes)} per device between device "
                f"and pinned host memory{calls}; the estimate leaves that time out", ir.anchor,
        help="planc has no sourced figures for a chip's host link or its host's CPU: "
             "the time is a lower bound for a plan with layouts `on host`; "
             "measure the step on the chip")


def _chip(ir, aot_report, name):
    try:
        return chip_to_price(aot_report.platform, aot_report.device_kind, name)
    except LookupError as exc:
        message, why = exc.args
        named = aot_report.platform == "cpu" or name is not None
        raise PlanError((error("P815", message, None if named else ir.anchor,
                               file=ir.file if named else None, help=why),),
                        ir.source_dict) from None


def _budget_help(all_terms, upper) -> tuple[str, ...]:
    top = max(all_terms, key=lambda t: t.seconds)
    share = top.seconds / upper if upper else 0
    what = f"the largest term is {top.name}: {share:.0%} of the step"
    if top.rules:
        what += ", from " + "; ".join(top.rules[:2])
    return (what, "shard what it moves over fewer devices, or more, as `planc cost` shows "
                  "per axis; or raise the budget")

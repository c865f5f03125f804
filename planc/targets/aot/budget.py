"""`budget(peak = SIZE)`: the compiled step's per-device peak against the plan's budget.

P807 is located at the `budget` statement. It names the topology, the peak and its parts
(arguments, outputs not aliased, temporaries), the largest arguments, and the plan change
that would help where one does: a parameter whose layout leaves a mesh axis unused and
has a dimension that axis (times what already splits it) divides, laid out over that axis
too, saves `1 - 1/size` of its bytes and of its mirrored optimizer slots' on every device.
P808 is a `budget(peak)` with no topology to compile for.
"""

from __future__ import annotations

import math

from planc.diagnostics import Diagnostic, error
from planc.ir import PlanIR
from planc.resolve import human_bytes

__all__ = ["Contributor", "peak_findings", "no_topology"]

_SUGGESTED = 2


class Contributor:
    """A parameter and its mirrored optimizer slots: per-device `nbytes` of them all;
    `rule` is where the rule that laid it out is (`plan.kd:7`), None for no rule."""

    __slots__ = ("path", "shape", "spec", "nbytes", "slots", "rule")

    def __init__(self, path, shape, spec, nbytes, slots, rule):
        self.path = path
        self.shape = tuple(shape)
        self.spec = tuple(spec)
        self.nbytes = nbytes
        self.slots = slots
        self.rule = rule


def no_topology(ir: PlanIR) -> Diagnostic:
    """P808: `budget(peak)` and nothing to compile the step for."""
    span = ir.budget.span if ir.budget is not None else None
    return error("P808", "`budget(peak)` is the compiled step's peak on a topology, and no "
                 "topology was given", span or ir.anchor,
                 label="needs a topology",
                 help="pass `--topology NAME` (`topology=` in Python): a TPU topology such "
                      "as `v5e:2x4`, or `cpu:N` for an estimate")


def peak_findings(ir: PlanIR, topology_label: str, memory: dict, estimate: bool,
                  largest_variables, contributors, axis_sizes: dict) -> list[Diagnostic]:
    """P807 when `memory["peak"]` exceeds `budget(peak)`; else nothing."""
    budget = ir.budget
    if budget is None or budget.peak is None or memory["peak"] <= budget.peak:
        return []
    peak = memory["peak"]
    unaliased = max(memory["output"] - memory["alias"], 0)
    kind = " (an XLA:CPU estimate)" if estimate else ""
    helps = [_parts(memory, unaliased)]
    if largest_variables:
        helps.append("largest arguments per device: " + ", ".join(
            f"`{p}` {human_bytes(b)}" for p, b in largest_variables[:3]))
    splits = [(c, _best_split(c, axis_sizes)) for c in contributors]
    suggested = _suggestions(splits, peak)
    helps += suggested
    reachable = sum(best[0] for _, best in splits if best is not None)
    if suggested and peak - reachable > budget.peak:
        helps.append(f"even all of these together save at most {human_bytes(reachable)}, "
                     f"short of the {human_bytes(peak - budget.peak)} over the budget: the "
                     "rest is temporaries and XLA's own buffers (a smaller per-device batch, "
                     "`jax.checkpoint`), or more devices")
    if memory["temp"] > memory["argument"]:
        helps.append("temporaries (activations, gradients, XLA's scratch) are most of it: a "
                     "smaller per-device batch, or rematerialisation (`jax.checkpoint`), "
                     "cuts them")
    elif len(helps) == 2 or not contributors:
        helps.append("shard the largest arguments over more mesh axes, use more devices, or "
                     "raise the budget")
    span = budget.span or ir.anchor
    return [error("P807", f"the step needs {human_bytes(peak)} per device at its peak on "
                  f"{topology_label}{kind}, over the budget of {human_bytes(budget.peak)}",
                  span, label=f"{human_bytes(budget.peak)} peak", help=tuple(helps))]


def _parts(memory: dict, unaliased: int) -> str:
    """What the peak holds, as parts that add up to it: XLA's argument, output and
    temporary figures, and the rest of its peak, which XLA does not itemise (on TPU its
    memory-space assignment's prefetch and scoped buffers)."""
    listed = memory["argument"] + unaliased + memory["temp"]
    text = (f"the peak holds the arguments ({human_bytes(memory['argument'])}), the outputs "
            f"not aliased to them ({human_bytes(unaliased)}) and XLA's temporaries "
            f"({human_bytes(memory['temp'])})")
    rest = memory["peak"] - listed
    if rest > 0:
        text += (f", and {human_bytes(rest)} more that XLA counts in its peak without "
                 "itemising it (buffers its memory assignment keeps live together)")
    return text


def _suggestions(splits, peak: int) -> list[str]:
    """The lines for the best split of each contributor (`splits`: `(contributor, its
    `_best_split`)`) that saves at least 1% of the peak, largest first."""
    found = []
    for c, best in splits:
        # A change that saves less than 1% of the peak is not worth a line.
        if best is not None and best[0] * 100 >= peak:
            found.append((best[0], c, best[1], best[2]))
    found.sort(key=lambda f: (-f[0], f[1].path))
    out = []
    for saving, c, axis, layout in found[:_SUGGESTED]:
        slots = (f", its {c.slots} optimizer slot{'s' if c.slots != 1 else ''} included"
                 if c.slots else "")
        rule = f" (the rule at {c.rule})" if c.rule else ""
        also = " as well" if any(e is not None for e in c.spec) else ""
        out.append(f"laying `{c.path}` out as `{layout}`, over `{axis}`{also}, would save "
                   f"{human_bytes(saving)} per device{slots}{rule}")
    return out


def _best_split(c: Contributor, axis_sizes: dict):
    """(bytes saved, axis, new layout text) of the best extra axis for `c`, or None."""
    spec = list(c.spec) + [None] * (len(c.shape) - len(c.spec))
    used = {a for e in spec if e is not None for a in ((e,) if isinstance(e, str) else e)}
    best = None
    for axis, size in axis_sizes.items():
        if size <= 1 or axis in used:
            continue
        # Unsplit dimensions first, then the largest: the change that moves least.
        order = sorted(range(len(spec)), key=lambda d: (spec[d] is not None, -c.shape[d]))
        for d in order:
            entry = spec[d]
            axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
            split = math.prod(axis_sizes[a] for a in axes)
            if c.shape[d] % (split * size) == 0:
                new = list(spec)
                new[d] = axis if not axes else axes + (axis,)
                saving = c.nbytes - c.nbytes // size
                if best is None or saving > best[0]:
                    best = (saving, axis, _layout_text(new))
                break
    return best


def _layout_text(spec) -> str:
    def entry(e):
        if e is None:
            return "_"
        if isinstance(e, str):
            return e
        return "(" + ", ".join(e) + ")"
    return "(" + ", ".join(entry(e) for e in spec) + ")"

"""Fitting a calibration: the efficiencies and overlap under which the cost model's
estimates come closest to step times measured on the chip.

Each `Sample` is one step: its terms at the chip's peaks (`planc cost`'s, uncalibrated)
and the seconds it really took. The fit minimizes the sum of squared log ratios of
estimate to measurement (a step 20% slow weighs as much as one 20% fast, whatever its
size), with the estimate computed by `planc.targets.cost.model.bounds` itself, so the
fitted figures mean exactly what the model does with them.

Only what some step decides is fitted: `matmul` and `hbm` when a step's estimate rests on
them, `ici`, `dcn` and `overlap` only when a step has collectives on those links. The
rest keep the uncalibrated value (efficiency 1, overlap 0) and are listed as `unfitted`.

The search is a deterministic pattern search over log-efficiency and overlap: the
model is a max of sums, flat wherever a term does not decide, which gradient methods
handle badly; a few thousand evaluations of `bounds` take well under a second.

    >>> from planc.targets.cost.model import Term
    >>> steps = [Sample("a", [Term("m", "compute", 2.0, 1.0)], 2.0),
    ...          Sample("b", [Term("m", "compute", 4.0, 2.0)], 4.0)]
    >>> round(fit(steps).efficiency["matmul"], 3)
    0.5
"""

from __future__ import annotations

import math

from planc.targets.cost.calibration import TERMS, Calibration
from planc.targets.cost.model import Term, bounds

__all__ = ["Sample", "Fit", "fit", "estimate", "efficiency_key", "FLOOR"]

# The lowest efficiency the search tries: far below any real step on a chip (a tiny step
# on a v5e runs at a few percent); it bounds the search, nothing else.
FLOOR = 1e-9
_STEPS = 16  # points tried on each side of the current value, per coordinate and round
_FINEST = 1e-5  # the smallest step in log-efficiency (and overlap) the search refines to


class Sample:
    """One measured step: `name`, its `terms` at the chip's peaks (`Term`s, as `planc cost`
    computes them), and `measured_s`, the seconds it took on the chip."""

    __slots__ = ("name", "terms", "measured_s")

    def __init__(self, name, terms, measured_s):
        self.name = name
        self.terms = tuple(terms)
        self.measured_s = float(measured_s)


class Fit:
    """The fitted `efficiency` (by `TERMS`) and `overlap`; `fitted`, what some step
    decided; `unfitted`, what kept its uncalibrated value; `estimates`, each sample's
    estimate under the fit, in the samples' order."""

    __slots__ = ("efficiency", "overlap", "fitted", "unfitted", "estimates")

    def __init__(self, efficiency, overlap, fitted, unfitted, estimates):
        self.efficiency = efficiency
        self.overlap = overlap
        self.fitted = fitted
        self.unfitted = unfitted
        self.estimates = estimates


def efficiency_key(term: Term) -> str:
    """Which efficiency of a calibration divides `term`."""
    if term.kind == "compute":
        return "matmul"
    if term.kind == "memory":
        return "hbm"
    return "dcn" if term.links == "dcn" else "ici"


def estimate(sample: Sample, efficiency: dict, overlap: float) -> float:
    """`estimate_s` of `sample` under these efficiencies and overlap (`model.bounds`)."""
    calibrated = [Term(t.name, t.kind, t.peak_seconds / efficiency[efficiency_key(t)],
                       t.peak_seconds, links=t.links) for t in sample.terms]
    return bounds(calibrated, Calibration(None, efficiency, overlap))[2]


def _span(key: str) -> float:
    """The whole range of a figure of the search: log-efficiency from `FLOOR` to 1, or the
    overlap from 0 to 1."""
    return 1.0 if key == "overlap" else -math.log(FLOOR)


def _clamp(key: str, value: float) -> float:
    low = 0.0 if key == "overlap" else math.log(FLOOR)
    high = 1.0 if key == "overlap" else 0.0
    return min(high, max(low, value))


def fit(samples) -> Fit:
    """The calibration that best explains `samples` (see the module docstring)."""
    samples = list(samples)
    if not samples:
        raise ValueError("a calibration is fitted on at least one measured step")
    present = {efficiency_key(t) for s in samples for t in s.terms if t.peak_seconds > 0}
    free = [k for k in TERMS if k in present]
    if "ici" in present or "dcn" in present:
        free.append("overlap")
    point = {k: math.log(0.5) for k in TERMS if k in free}
    if "overlap" in free:
        point["overlap"] = 0.5

    def unpack(p):
        eff = {k: math.exp(p[k]) if k in p else 1.0 for k in TERMS}
        return eff, p.get("overlap", 0.0)

    def loss(p):
        eff, ov = unpack(p)
        return sum(math.log(estimate(s, eff, ov) / s.measured_s) ** 2 for s in samples)

    best = loss(point)
    # Each figure alone, and every efficiency at once: at a kink of the max, where two
    # terms tie, neither efficiency alone can lower the estimate; both together can.
    effs = [k for k in point if k != "overlap"]
    directions = [{k: 1.0} for k in point] + ([dict.fromkeys(effs, 1.0)] if len(effs) > 1 else [])
    scale = 1.0
    while point and scale > _FINEST:
        moved = False
        for direction in directions:
            for i in range(-_STEPS, _STEPS + 1):
                if i == 0:
                    continue
                trial = {k: _clamp(k, v + direction.get(k, 0.0) * _span(k) * scale * i / _STEPS)
                         for k, v in point.items()}
                value = loss(trial)
                if value < best - 1e-15:
                    best, point, moved = value, trial, True
        if not moved:
            scale /= 4
    fitted, unfitted = [], []
    for k in list(TERMS) + ["overlap"]:
        if k not in point:
            unfitted.append(k)
            continue
        # A figure no step's estimate depends on is not measured: it keeps the
        # uncalibrated value, which changes no estimate either.
        plain = dict(point)
        plain[k] = 0.0
        if abs(loss(plain) - best) <= 1e-12 * max(1.0, best):
            point = plain
            unfitted.append(k)
        else:
            fitted.append(k)
    eff, overlap = unpack(point)
    return Fit(eff, overlap, tuple(fitted), tuple(unfitted),
               tuple(estimate(s, eff, overlap) for s in samples))

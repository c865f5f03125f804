"""Fitting a calibration: the efficiencies, the cost of starting an op and the overlap
under which the cost model's estimates come closest to step times measured on the chip.

Each `Sample` is one step: its ops at the chip's peaks (a `model.Profile`), its
collectives at the peaks (`Term`s), and the seconds it really took. The fit minimizes
the sum of squared log ratios of estimate to measurement (a step 20% slow weighs as much
as one 20% fast, whatever its size), with the estimate computed by the model itself
(`model.op_terms` and `model.bounds`), so the fitted figures mean exactly what the model
does with them.

Only what some step decides is fitted: `matmul`, `hbm` and `op_s` when a step's estimate
rests on them, `ici`, `dcn` and `overlap` only when a step has collectives on those
links. The rest keep the uncalibrated value (efficiency 1, `op_s` 0, overlap 0) and are
listed as `unfitted`.

The search is a deterministic pattern search over the logs of the efficiencies and of
`op_s`, and the overlap: the model is a sum of maxima, flat wherever a term does not
decide, which gradient methods handle badly; a few thousand pricings of a step's
profile take well under a second.

    >>> import numpy as np
    >>> from planc.targets.cost.model import Profile
    >>> def only_matmul(seconds):  # one op, all matrix work, at the peak
    ...     return Profile(np.array([seconds]), np.array([0.0]), np.array([1.0]), 0.0, 0)
    >>> steps = [Sample("a", only_matmul(1.0), (), 2.0), Sample("b", only_matmul(2.0), (), 4.0)]
    >>> round(fit(steps).efficiency["matmul"], 3)
    0.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planc.targets.cost.calibration import FLOOR, TERMS, Calibration
from planc.targets.cost.model import Profile, Term, bounds, op_terms

__all__ = ["Sample", "Fit", "fit", "estimate", "efficiency_key", "FLOOR", "sample_of"]

# The lowest efficiency the search tries is `FLOOR`, the least a calibration file may
# hold, so a fitted file always reads back.
_OP_S = (1e-9, 1e-3)  # the range of `op_s` searched, seconds: nothing to a millisecond an op
_STEPS = 16  # points tried on each side of the current value, per coordinate and round
_FINEST = 1e-5  # the smallest step (a fraction of each figure's range) the search refines to


@dataclass(slots=True)
class Sample:
    """One measured step: `name`, its core and DMA ops at the chip's peaks (`profile`, a
    `model.Profile`), its `collectives` at the peaks (`Term`s), and `measured_s`, the
    seconds it took on the chip."""

    name: str
    profile: Profile
    collectives: tuple
    measured_s: float


def sample_of(name: str, report, measured_s: float) -> Sample:
    """The `Sample` of a step `planc cost` priced (`report`, a `CostReport`) that took
    `measured_s` on the chip."""
    from planc.targets.cost.chips import chip_named
    from planc.targets.cost.model import profile

    return Sample(name, profile(report.counts.ops, chip_named(report.chip)),
                  tuple(t for t in report.terms if t.kind == "collective"), float(measured_s))


@dataclass(slots=True)
class Fit:
    """The fitted `efficiency` (by `TERMS`), `overlap` and `op_s`; `fitted`, what some step
    decided; `unfitted`, what kept its uncalibrated value; `estimates`, each sample's
    estimate under the fit, in the samples' order."""

    efficiency: dict
    overlap: float
    op_s: float
    fitted: tuple
    unfitted: tuple
    estimates: tuple

    @property
    def calibration(self) -> Calibration:
        return Calibration(None, dict(self.efficiency), self.overlap, op_s=self.op_s)


def efficiency_key(term: Term) -> str:
    """Which efficiency of a calibration divides a collective `term`."""
    return "dcn" if term.links == "dcn" else "ici"


def estimate(sample: Sample, calibration: Calibration) -> float:
    """`estimate_s` of `sample` under `calibration` (`model.bounds`)."""
    eff = calibration.efficiency
    talk = [Term(t.name, t.kind, t.peak_seconds / eff[efficiency_key(t)], t.peak_seconds,
                 links=t.links) for t in sample.collectives]
    return bounds(op_terms(sample.profile, calibration) + talk, calibration)[2]


# Each figure the search moves: its range in the search's coordinates, and the value
# that leaves it out (what an uncalibrated model uses).
def _range(key: str) -> tuple[float, float]:
    if key == "overlap":
        return 0.0, 1.0
    if key == "op_s":
        return math.log(_OP_S[0]), math.log(_OP_S[1])
    return math.log(FLOOR), 0.0


def _unused(key: str) -> float:
    return {"overlap": 0.0, "op_s": -math.inf}.get(key, 0.0)


def _calibration(point: dict) -> Calibration:
    eff = {k: math.exp(point[k]) if k in point else 1.0 for k in TERMS}
    op_s = math.exp(point["op_s"]) if "op_s" in point else 0.0
    return Calibration(None, eff, point.get("overlap", 0.0), op_s=op_s)


def fit(samples) -> Fit:
    """The calibration that best explains `samples` (see the module docstring)."""
    samples = list(samples)
    if not samples:
        raise ValueError("a calibration is fitted on at least one measured step")
    free = []
    if any(s.profile.matmul.any() for s in samples):
        free.append("matmul")
    if any(s.profile.memory.any() or s.profile.dma_s for s in samples):
        free.append("hbm")
    links = {efficiency_key(t) for s in samples for t in s.collectives if t.peak_seconds > 0}
    free += [k for k in ("ici", "dcn") if k in links]
    if any(s.profile.runs.any() for s in samples):
        free.append("op_s")
    if links:
        free.append("overlap")
    point = {k: (0.5 if k == "overlap" else math.log(1e-6) if k == "op_s" else math.log(0.5))
             for k in free}

    def loss(p):
        cal = _calibration(p)
        return sum(math.log(estimate(s, cal) / s.measured_s) ** 2 for s in samples)

    best = loss(point)
    # Each figure alone, each pair of them (both ways) and every efficiency at once: at a
    # kink of a max, where two terms tie, neither figure alone can lower the estimate;
    # both together can.
    keys = list(point)
    effs = [k for k in keys if k in TERMS]
    directions = ([{k: 1.0} for k in keys]
                  + [{a: 1.0, b: sign} for i, a in enumerate(keys) for b in keys[i + 1:]
                     for sign in (1.0, -1.0)]
                  + ([dict.fromkeys(effs, 1.0)] if len(effs) > 2 else []))
    scale = 1.0
    while point and scale > _FINEST:
        moved = False
        for direction in directions:
            for i in range(-_STEPS, _STEPS + 1):
                if i == 0:
                    continue
                trial = {}
                for k, v in point.items():
                    low, high = _range(k)
                    trial[k] = min(high, max(low, v + direction.get(k, 0.0)
                                             * (high - low) * scale * i / _STEPS))
                value = loss(trial)
                if value < best - 1e-15:
                    best, point, moved = value, trial, True
        if not moved:
            scale /= 4
    fitted, unfitted = [], []
    for k in list(TERMS) + ["op_s", "overlap"]:
        if k not in point:
            unfitted.append(k)
            continue
        # A figure no step's estimate depends on is not measured: it keeps the
        # uncalibrated value, which changes no estimate either.
        plain = {key: v for key, v in point.items() if key != k or _unused(k) == 0.0}
        if k in plain:
            plain[k] = _unused(k)
        if abs(loss(plain) - best) <= 1e-12 * max(1.0, best):
            point = plain
            unfitted.append(k)
        else:
            fitted.append(k)
    cal = _calibration(point)
    return Fit(cal.efficiency, cal.overlap, cal.op_s, tuple(fitted), tuple(unfitted),
               tuple(estimate(s, cal) for s in samples))

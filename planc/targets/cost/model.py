"""From counts to seconds: the terms of one step, its bounds, its estimate, and the
bottleneck in the plan's words.

Per device, per step:

- `matmul`: matrix FLOPs (by operand type, f32 at high precision as its extra passes) at
  the chip's peak, over the calibrated efficiency;
- `hbm`: every HBM byte the step reads and writes, at the HBM bandwidth over its
  efficiency (elementwise work on TPU is bound by this, not by its FLOPs);
- one term per collective kind and mesh axes: the bytes each device sends, by the
  algorithm (ring all-gather and reduce-scatter (n-1)/n of the full array, all-reduce
  2(n-1)/n, all-to-all (n-1)/n, a permute its buffer), over the links the axes hold
  (`planc.targets.cost.links`) or the DCN.

`lower_s` is the largest term at peak rates (no step runs faster); `upper_s` the sum of
the calibrated terms (nothing overlaps); `estimate_s` the larger of compute and memory
plus the collective time not hidden under them (`overlap` of the calibration):
`lower_s <= estimate_s <= upper_s`.
"""

from __future__ import annotations

__all__ = ["Term", "terms", "bounds", "moved_bytes", "matmul_term", "hbm_term",
           "collective_term"]


class Term:
    """One part of the step: `name`, `seconds` (calibrated), `peak_seconds` (at the chip's
    peak), what it is (`kind`: "compute", "memory", "collective") and, for a collective,
    the `collective` it prices, with `variables` and `rules` behind it."""

    __slots__ = ("name", "kind", "seconds", "peak_seconds", "collective", "variables",
                 "rules", "links", "sent")

    def __init__(self, name, kind, seconds, peak_seconds, collective=None, variables=(),
                 rules=(), links=None, sent=0):
        self.name = name
        self.kind = kind
        self.seconds = seconds
        self.peak_seconds = peak_seconds
        self.collective = collective
        self.variables = tuple(variables)
        self.rules = tuple(rules)
        self.links = links
        self.sent = sent  # a collective's bytes sent by one device (`moved_bytes`)


def moved_bytes(kind: str, result_bytes: int, group: int | None) -> int:
    """Bytes one device sends for a collective whose results on it total `result_bytes`
    over groups of `group` devices."""
    n = group or 1
    if kind == "collective-permute" or n <= 1:
        return result_bytes if kind == "collective-permute" else 0
    if kind == "all-gather" or kind == "all-to-all":
        return result_bytes * (n - 1) // n
    if kind == "reduce-scatter":  # the result is one of n pieces of the reduced array
        return result_bytes * (n - 1)
    if kind == "all-reduce":
        return 2 * result_bytes * (n - 1) // n
    return result_bytes


def matmul_term(peak_seconds: float, calibration) -> Term:
    """Matrix work taking `peak_seconds` at the chip's peak, at its calibrated rate."""
    return Term("matmul compute", "compute", peak_seconds / calibration.efficiency["matmul"],
                peak_seconds)


def hbm_term(nbytes: float, chip, calibration) -> Term:
    """`nbytes` read and written in HBM, at the chip's bandwidth over its efficiency."""
    peak = nbytes / chip.hbm_bytes_per_s
    return Term("HBM traffic", "memory", peak / calibration.efficiency["hbm"], peak)


def collective_term(name: str, sent: float, where, chip, calibration,
                    collective=None) -> Term:
    """`sent` bytes from each device over axes lying as `where` (their `AxisPlacement`s):
    the DCN if any spans slices, else the links of the one axis (a line of one link for
    several axes, or none)."""
    eff = calibration.efficiency
    if any(p.kind == "dcn" for p in where):
        rate, efficiency, links = chip.dcn_bytes_per_s, eff["dcn"], "dcn"
    else:
        count = where[0].links if len(where) == 1 else 1
        rate, efficiency, links = chip.ici_link_bytes_per_s * count, eff["ici"], count
    peak = sent / rate
    return Term(name, "collective", peak / efficiency, peak, collective=collective,
                links=links, sent=int(sent))


def terms(counts, collectives, chip, calibration, placements) -> list[Term]:
    """The step's terms (see the module docstring); `placements` maps a mesh axis to its
    `AxisPlacement`."""
    peak_matmul = sum(n / chip.peak_flops(dtype) for dtype, n in counts.matmul_by_dtype.items())
    out = [matmul_term(peak_matmul, calibration),
           hbm_term(counts.total_hbm_bytes, chip, calibration)]
    for c in collectives:
        axes = c.axes or ()
        over = "(" + ", ".join(axes) + ")" if len(axes) > 1 else (axes[0] if axes else "?")
        out.append(collective_term(f"{c.kind} over {over}",
                                   moved_bytes(c.kind, c.bytes, c.group_size),
                                   [placements[a] for a in axes if a in placements], chip,
                                   calibration, collective=c))
    return out


def bounds(all_terms, calibration) -> tuple[float, float, float]:
    """(lower_s, upper_s, estimate_s) of the terms."""
    lower = max((t.peak_seconds for t in all_terms), default=0.0)
    upper = sum(t.seconds for t in all_terms)
    compute = max((t.seconds for t in all_terms if t.kind != "collective"), default=0.0)
    talk = sum(t.seconds for t in all_terms if t.kind == "collective")
    estimate = compute + (1.0 - calibration.overlap) * talk
    estimate = max(estimate, compute, talk * (1.0 - calibration.overlap), lower)
    return lower, upper, min(max(estimate, lower), upper)

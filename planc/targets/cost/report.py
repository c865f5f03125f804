"""`CostReport`: what `plan.cost` returns and `planc cost` renders (`planc.reports.cost`).

Times are seconds per step per device, bytes are bytes per device. `to_dict()` is the
JSON form, schema `planc.cost/1`:

    {
      "schema": "planc.cost/1",
      "plan": "mlp", "topology": "v5e:2x4", "chip": "v5e", "devices": 8,
      "estimate": false,                 # true for cpu:N, priced as `chip`
      "exact": true,                     # false: a loop's trip count is unknown (lower bounds)
      "time": {"lower_s": ..., "upper_s": ..., "estimate_s": ...},  # upper_s null when not
                                         # exact, or an op is unestimated
      "mfu": 0.41,                       # FLOPs / (estimate_s x the chip's bf16 peak)
      "flops": {"total": ..., "matmul": ..., "elementwise": ..., "custom": ...},
      "unestimated": ["fusion.500: reduce-window (window 1x1x16383), reduce (...)", ...],
                                         # ops XLA:TPU's cost model gave up on (P824)
      "hbm_bytes": ...,                  # what one device reads and writes in HBM
      "hbm_bytes_by_class": {"matmul": ..., "elementwise": ..., "custom": ..., "collective": ...},
      "host": {"bytes": ..., "calls": ...},  # to and from pinned host memory, and work run
                                         # on the host: not in the times (P821)
      "collectives": [{"kind": "all-gather", "axes": ["fsdp"], "count": 12, "bytes": ...,
                       "time_s": ..., "links": 2,  # bytes: what one device sends
                       "algorithm": "StrategyND colors:2 phases:2" | null}, ...],
                                         # algorithm: what XLA recorded, that the links
                                         # come from; null: from the axes' placement
      "axes": [{"axis": "fsdp", "kind": "ring", "physical_dims": [0], "links": 2}, ...],
      "bottleneck": [{"term": "all-gather over fsdp", "share": 0.41, "seconds": ...,
                      "variables": [...], "rules": [...]}, ...],  # share: of the terms' sum
      "calibration": null | {"file": ..., "chip": ..., "efficiency": {...}, "overlap": ...},
      "budget": null | {"step_s": 0.12, "fits": true},  # fits null: only a lower bound is
                                         # within it (P823, P824)
      "peak": ...,                       # the compiled step's peak bytes (planc aot's)
      "ok": true, "diagnostics": [...], "summary": {...}
    }
"""

from __future__ import annotations

from planc.diagnostics import severity_counts
from planc.diagnostics.plan_error import Diagnosed

__all__ = ["CostReport", "SCHEMA", "TOP", "seconds_text"]

SCHEMA = "planc.cost/1"
TOP = 5  # bottleneck terms listed


class CostReport(Diagnosed):
    """A step's predicted time on a topology: the terms, the bounds, the bottleneck."""

    __slots__ = ("plan", "topology", "chip", "devices", "estimate", "exact", "unknown_loops",
                 "lower_s", "counted_upper_s", "estimate_s", "peak_flops", "counts", "terms",
                 "placements", "calibration", "budget_step", "aot", "diagnostics", "sources")

    def __init__(self, **fields):
        fields.setdefault("counted_upper_s", fields.pop("upper_s", None))
        for name in self.__slots__:
            setattr(self, name, fields[name])

    def __repr__(self):
        return (f"<CostReport {self.plan!r} on {self.topology}: {self.estimate_s * 1e3:.3f} ms "
                f"per step{' (estimate)' if self.estimate else ''}>")

    @property
    def mfu(self) -> float:
        if self.estimate_s <= 0:
            return 0.0
        return self.counts.total_flops / (self.estimate_s * self.peak_flops)

    @property
    def upper_s(self) -> float | None:
        """The sum of the calibrated terms (nothing overlaps); None where a loop's trip
        count is unknown (the terms then count that loop once) or an op's time is not
        known (P824): their sum then bounds nothing (`counted_upper_s` keeps it)."""
        return self.counted_upper_s if self.counts.bounded else None

    @property
    def fits(self) -> bool | None:
        """Whether the estimate is within `budget(step)`; None without one, and where
        only a lower bound is within it (a loop's trip count unknown, P823; an op XLA:TPU
        could not estimate, P824)."""
        if self.budget_step is None:
            return None
        if self.estimate_s > self.budget_step:
            return False
        return True if self.counts.bounded else None

    @property
    def bottleneck(self):
        """The largest terms, largest first (at most `TOP`), with their share of the
        terms' sum (`upper_s` where it is known)."""
        # a window is a span of the core's terms, not a part of the step
        parts = [t for t in self.terms if t.kind != "window"]
        ranked = sorted(parts, key=lambda t: -t.seconds)[:TOP]
        total = self.counted_upper_s
        return [(t, t.seconds / total if total else 0.0) for t in ranked
                if t.seconds > 0]

    def to_dict(self) -> dict:
        from planc.diagnostics.formats import diagnostic_dict

        c = self.counts
        return {
            "schema": SCHEMA,
            "plan": self.plan,
            "topology": self.topology,
            "chip": self.chip,
            "devices": self.devices,
            "estimate": self.estimate,
            "exact": self.exact,
            "time": {"lower_s": self.lower_s, "upper_s": self.upper_s,
                     "estimate_s": self.estimate_s},
            "mfu": round(self.mfu, 6),
            "flops": {"total": c.total_flops, **{k: v for k, v in c.flops.items()
                                                  if k != "collective"}},
            "unestimated": list(c.unestimated),
            "hbm_bytes": c.total_hbm_bytes,
            "hbm_bytes_by_class": dict(c.hbm_bytes),
            "host": {"bytes": c.host_bytes, "calls": c.host_calls},
            "collectives": [{"kind": t.collective.kind,
                             "axes": list(t.collective.axes or ()),
                             "count": t.collective.count,
                             "bytes": t.sent, "time_s": t.seconds, "links": t.links,
                             "algorithm": t.algorithm}
                            for t in self.terms if t.collective is not None],
            "axes": [p.to_dict() for p in self.placements.values()],
            "bottleneck": [{"term": t.name, "share": round(share, 6), "seconds": t.seconds,
                            "variables": list(t.variables), "rules": list(t.rules)}
                           for t, share in self.bottleneck],
            "calibration": self.calibration.to_dict(),
            "budget": (None if self.budget_step is None
                       else {"step_s": self.budget_step, "fits": self.fits}),
            "peak": self.aot.peak,
            "ok": self.ok,
            "diagnostics": [diagnostic_dict(d) for d in self.diagnostics],
            "summary": severity_counts(self.diagnostics),
        }


def seconds_text(s: float) -> str:
    """`0.120` seconds as people read step times: `120 ms`, `85.2 us`, `1.5 s`."""
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


def percent_text(fraction: float) -> str:
    """A fraction as people read an MFU: `47%`; under 10%, two significant digits
    (`4.2%`, `0.3%`), so a small step's MFU never reads `0%`.

    >>> percent_text(0.4712), percent_text(0.042), percent_text(0.0031), percent_text(0)
    ('47%', '4.2%', '0.31%', '0%')
    """
    p = fraction * 100
    return f"{p:.0f}%" if p >= 10 or p == 0 else f"{p:.2g}%"

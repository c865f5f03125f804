"""`planc cost`'s outputs: the predicted step time as a short table (`render_text`) and
as the `planc.cost/1` document (`document`, `CostReport.to_dict` with every diagnostic of
the run); `planc cost --calibrate`'s table of measured and fitted times
(`render_calibration`)."""

from __future__ import annotations

from planc.resolve.memory import human_bytes
from planc.targets.cost.report import percent_text, seconds_text

__all__ = ["render_text", "document", "page", "cost_diff", "cost_diff_text",
           "render_calibration"]


def _flops_text(n: float) -> str:
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}FLOP"
    return f"{n:.0f} FLOP"


def _ops_text(terms) -> str:
    """How many ops the step runs, by what bounds them (the per-op model's terms)."""
    by = {t.kind: t.ops for t in terms if t.kind in ("compute", "memory", "dma")}
    line = (f"  ops        {by.get('compute', 0) + by.get('memory', 0):>12,}  on the core "
            f"({by.get('compute', 0):,} bound by matmul FLOPs, {by.get('memory', 0):,} by HBM "
            "bytes)")
    return line + (f", {by['dma']:,} DMA copies beside it" if by.get("dma") else "")


def render_text(report) -> str:
    c = report.counts
    what = (f"{report.devices} simulated CPU devices priced as {report.chip}"
            if report.estimate else f"{report.devices} x {report.chip}")
    lines = [f"plan `{report.plan}` on {report.topology} ({what}): predicted step "
             f"{seconds_text(report.estimate_s)}, MFU {percent_text(report.mfu)}"
             + ("" if report.exact else " (lower bounds: a loop's trip count is unknown)"),
             "",
             f"time per step   lower {seconds_text(report.lower_s)}  estimate "
             f"{seconds_text(report.estimate_s)}  upper "
             + (seconds_text(report.upper_s) if report.upper_s is not None else
                "unknown (a loop's trip count is unknown)" if not report.exact else
                f"unknown ({len(c.unestimated)} op(s) XLA:TPU could not estimate)"),
             "calibration     " + (f"{report.calibration.file} ({report.calibration.chip})"
                                    if report.calibration.file else
                                    "none: the chip's peak rates, nothing overlapped"),
             "", "per device per step",
             f"  FLOPs      {_flops_text(c.total_flops):>12}  (matmul "
             f"{_flops_text(c.flops['matmul'])}, elementwise "
             f"{_flops_text(c.flops['elementwise'])})",
             f"  HBM bytes  {human_bytes(c.total_hbm_bytes):>12}",
             _ops_text(report.terms)]
    if c.host_bytes or c.host_calls:
        lines.append(f"  host       {human_bytes(c.host_bytes):>12}  to and from pinned host "
                     f"memory, {c.host_calls} computation(s) on the host: not in the times")
    collective_terms = [t for t in report.terms if t.collective is not None]
    if collective_terms:
        lines += ["", "collectives per step (bytes each device sends)"]
        width = max(len(t.name) for t in collective_terms)
        for t in collective_terms:
            links = "DCN" if t.links == "dcn" else f"{t.links} link{'s' if t.links != 1 else ''}"
            if t.algorithm:
                links += f", {t.algorithm}"
            lines.append(f"  {t.name:<{width}}  {t.collective.count:>5} x  "
                         f"{human_bytes(t.sent):>10}  {seconds_text(t.seconds):>9}  ({links})")
    lines += ["", "bottleneck (share of the upper bound)" if report.upper_s is not None
              else "bottleneck (share of the terms counted)"]
    for t, share in report.bottleneck:
        lines.append(f" {percent_text(share):>5}  {t.name}  {seconds_text(t.seconds)}")
        if t.variables:
            shown = ", ".join(f"`{v}`" for v in t.variables[:3])
            more = f" and {len(t.variables) - 3} more" if len(t.variables) > 3 else ""
            lines.append(f"        of {shown}{more}")
        for rule in t.rules[:3]:
            lines.append(f"        rule {rule}")
    if report.budget_step is not None:
        verdict = ("fits" if report.fits else "OVER BUDGET" if report.fits is False else
                   "unknown: only a lower bound is within it")
        lines += ["", f"budget(step = {seconds_text(report.budget_step)}): {verdict}"]
    return "\n".join(lines) + "\n"


def document(report, diagnostics) -> dict:
    """The `planc.cost/1` document of `report`, carrying every diagnostic of the run."""
    from planc.diagnostics import Diagnostic, severity_counts
    from planc.diagnostics.formats import diagnostic_dict

    doc = report.to_dict()
    doc["diagnostics"] = [diagnostic_dict(d) for d in sorted(diagnostics, key=Diagnostic.sort_key)]
    doc["summary"] = severity_counts(diagnostics)
    return doc


def page(plan, report, diagnostics, parameters) -> str:
    """The HTML page of `report`: `planc aot`'s page of the same compile, with the time
    section (`planc.reports.html.cost_data`)."""
    from planc.reports import aot as aot_reports
    from planc.reports.html import cost_page

    return cost_page(document(report, diagnostics),
                     aot_reports.document(report.aot, diagnostics),
                     **aot_reports.page_parts(plan, report.aot, parameters))


def _sent_by_axes(report) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in report.terms:
        if t.collective is not None:
            key = ",".join(t.collective.axes or ("?",))
            out[key] = out.get(key, 0) + t.sent
    return out


def cost_diff(old, new) -> dict:
    """What changed between two `CostReport`s of one step: the peak, the bytes each device
    sends per mesh axes, and the time (new minus old)."""
    old_axes, new_axes = _sent_by_axes(old), _sent_by_axes(new)
    return {
        "topology": new.topology,
        "peak": {"old": old.aot.peak, "new": new.aot.peak, "delta": new.aot.peak - old.aot.peak},
        "bytes_per_axes": [{"axes": key.split(","), "old": old_axes.get(key, 0),
                            "new": new_axes.get(key, 0),
                            "delta": new_axes.get(key, 0) - old_axes.get(key, 0)}
                           for key in sorted(set(old_axes) | set(new_axes))],
        "time": {k: {"old": getattr(old, k), "new": getattr(new, k),
                     "delta": (None if getattr(old, k) is None or getattr(new, k) is None
                               else getattr(new, k) - getattr(old, k))}
                 for k in ("lower_s", "estimate_s", "upper_s")},
    }


def _signed_bytes(n: int) -> str:
    return ("+" if n > 0 else "-" if n < 0 else "±") + human_bytes(abs(n))


def _signed_seconds(s: float) -> str:
    return ("+" if s > 0 else "-" if s < 0 else "±") + seconds_text(abs(s))


def cost_diff_text(doc: dict) -> str:
    t, p = doc["time"], doc["peak"]
    lines = [f"cost on {doc['topology']} (per device per step)",
             f"  step time  {seconds_text(t['estimate_s']['old'])} -> "
             f"{seconds_text(t['estimate_s']['new'])}  ({_signed_seconds(t['estimate_s']['delta'])})",
             f"  peak       {human_bytes(p['old'])} -> {human_bytes(p['new'])}  "
             f"({_signed_bytes(p['delta'])})"]
    for row in doc["bytes_per_axes"]:
        axes = ", ".join(row["axes"])
        lines.append(f"  sent over {axes}: {human_bytes(row['old'])} -> {human_bytes(row['new'])}"
                     f"  ({_signed_bytes(row['delta'])})")
    return "\n".join(lines) + "\n"


def render_calibration(doc: dict, path: str) -> str:
    """The calibration `doc` (`planc.calibration/1`) written to `path`, as a table: each
    step measured on the chip against its estimate before and after the fit."""
    m = doc["measured"]
    eff = doc["efficiency"]
    fitted = ", ".join(f"{k} {eff[k]:.3g}" if k in eff else f"{k} {doc[k]:.3g}"
                       for k in m["fitted"]) or "nothing"
    lines = [f"calibration of {doc['chip']} ({m['device_kind']} x {m['devices']}, JAX "
             f"{m['jax']}, {m['date']}) written to {path}",
             f"fitted: {fitted}; kept at the peaks: {', '.join(m['unfitted']) or 'nothing'}",
             ""]
    width = max(len(s["step"]) for s in m["steps"])
    lines.append(f"  {'step':<{width}}  {'measured':>10}  {'peaks':>10}  {'fitted':>10}  error")
    for s in m["steps"]:
        error = s["estimate_s"] / s["measured_s"] - 1
        lines.append(f"  {s['step']:<{width}}  {seconds_text(s['measured_s']):>10}  "
                     f"{seconds_text(s['uncalibrated_s']):>10}  "
                     f"{seconds_text(s['estimate_s']):>10}  {error:+.1%}")
    return "\n".join(lines) + "\n"

"""`planc aot`'s outputs: the report of a step compiled ahead of time as a short table
(`render_text`), as the `planc.aot/1` document (`document`, `AotReport.to_dict` with every
diagnostic of the run) and as the HTML page (`page`).

The text shows, per device: XLA's memory figures (host rows only when the step places
anything in host memory), the peak against `budget(peak)`, the collectives by kind and
mesh axes, and the largest arguments by variable and by the plan rule that laid them out.
"""

from __future__ import annotations

from planc.resolve.memory import human_bytes

__all__ = ["render_text", "document", "page"]

_MEMORY_ROWS = (("argument", "arguments"), ("output", "outputs"),
                ("alias", "aliased (donated)"), ("temp", "temporaries"),
                ("generated_code", "generated code"))
_HOST_ROWS = (("host_argument", "host arguments"), ("host_output", "host outputs"),
              ("host_alias", "host aliased"), ("host_temp", "host temporaries"))


def _axes_text(c) -> str:
    if c.axes is None:
        return "(groups not read)"
    if not c.axes:
        return "-"
    text = c.axes[0] if len(c.axes) == 1 else "(" + ", ".join(c.axes) + ")"
    if c.partial:
        text += f" ({c.group_size} devices a group)"
    return text


def _title(report) -> str:
    mesh = " x ".join(f"{n}={s}" for n, s in report.mesh.items())
    what = (f"{report.devices} simulated CPU devices" if report.platform == "cpu"
            else f"{report.devices} x {report.device_kind}")
    return (f"plan `{report.plan}` on {report.topology} ({what}), mesh {mesh}, "
            f"compiled in {report.compile_seconds:.1f} s"
            + ("" if report.donate else ", nothing donated"))


def render_text(report) -> str:
    m = report.memory
    lines = [_title(report), "", "memory per device"]
    rows = [(label, m[key]) for key, label in _MEMORY_ROWS]
    rows += [(label, m[key]) for key, label in _HOST_ROWS if m[key]]
    width = max(len(label) for label, _ in rows + [("peak", 0)])
    for label, value in rows:
        lines.append(f"  {label:<{width}}  {human_bytes(value):>10}")
    peak = f"  {'peak':<{width}}  {human_bytes(m['peak']):>10}"
    if report.estimate:
        peak += "  estimate: arguments + outputs - aliased + temporaries (XLA:CPU)"
    if report.budget_peak is not None:
        verdict = "fits" if report.fits else "OVER BUDGET"
        peak += f"  budget {human_bytes(report.budget_peak)}: {verdict}"
    lines.append(peak)
    if report.collectives:
        lines += ["", "collectives per step"]
        kinds = max(len(c.kind) for c in report.collectives)
        axes = max(len(_axes_text(c)) for c in report.collectives)
        for c in report.collectives:
            lines.append(f"  {c.kind:<{kinds}}  {_axes_text(c):<{axes}}  "
                         f"{c.count:>4} x  {human_bytes(c.bytes):>10}")
    else:
        lines += ["", "collectives per step: none"]
    if report.largest_variables:
        lines += ["", "largest arguments per device"]
        lines += [f"  {human_bytes(b):>10}  {p}" for p, b in report.largest_variables]
    if report.largest_rules:
        lines += ["", "by the rule that laid them out"]
        lines += [f"  {human_bytes(b):>10}  {r}" for r, b in report.largest_rules]
    if report.stages:
        lines += ["", "per pipeline position (one SPMD program: the compiled figures are "
                      "every position's)"]
        for p in report.stages:
            lines.append(f"  position {p.position} (stages "
                         f"{', '.join(map(str, p.stages))}): parameters and state "
                         f"{human_bytes(p.analytic_bytes)} analytic, arguments "
                         f"{human_bytes(p.argument_bytes)}, peak {human_bytes(p.peak)}"
                         + (f"; plan.pipeline's loop {human_bytes(p.analytic_peak)} "
                            f"analytic ({p.analytic_peak / p.peak - 1:+.1%})"
                            if p.analytic_peak and p.peak else "")
                         + (f"; under its schedule a step-by-step runtime keeps "
                            f"{human_bytes(p.schedule_activations)} of activations"
                            if p.schedule_activations is not None else ""))
    return "\n".join(lines) + "\n"


def document(report, diagnostics) -> dict:
    """The `planc.aot/1` document of `report`, carrying `diagnostics`: every diagnostic
    of the run (the plan's own warnings as well as the compile's), sorted."""
    from planc.diagnostics import Diagnostic, severity_counts
    from planc.diagnostics.formats import diagnostic_dict

    doc = report.to_dict()
    doc["diagnostics"] = [diagnostic_dict(d) for d in sorted(diagnostics, key=Diagnostic.sort_key)]
    doc["summary"] = severity_counts(diagnostics)
    return doc


def page(plan, report, diagnostics, parameters) -> str:
    """The HTML page of `report`, with the table of `parameters` (the step's parameters
    as `planc.Variable`s) as `planc explain` has it."""
    from planc.reports.html import aot_page

    return aot_page(document(report, diagnostics), **page_parts(plan, report, parameters))


def page_parts(plan, report, parameters) -> dict:
    """What a page of a compiled step shows beside its report: the parameters' table as
    `planc explain` has it, and the mesh's slices."""
    from planc.reports.explain import document as explain_document
    from planc.resolve import validate

    layouts = validate(plan.ir, parameters, report.devices)
    return {"explain": explain_document(plan, layouts, list(layouts.diagnostics),
                                        layouts.variable_dicts()),
            "slices": {a.name: a.slices for a in plan.ir.mesh.axes}}

"""The page's data: what `planc explain` and `planc aot` report, as one JSON object for
the page's script to draw (`planc.reports.html.page` embeds it).

Built from the reports' own JSON documents (`planc.explain/1`, `planc.aot/1`), never from
jax: `aot`'s figures come in computed. Every string taken from a model or a plan (paths,
patterns, file and plan names, messages) goes through `shown`, so control characters
and bidi overrides reach the page as visible escapes, and the script only ever sets it
as text. The object, schema ``planc.page/1``::

    {
      "schema": "planc.page/1", "kind": "explain" | "aot" | "cost",
      "title": "plan gemma",
      "facts": [["file", "plans/gemma.kd"], ...],      # the header's label/value lines
      "mesh": {"axes": [{"name": "batch", "size": 4, "slices": 1}, ...],
               "devices": 8,                           # null: an `auto` axis has no size
               "note": null | "why the devices are not drawn"},
      "memory": {"bars": [BAR, ...], "notes": ["..."]},
      "variables": {"columns": ["path", "shape", ...], # what each row holds, in order
                    "rows": [[...], ...],              # model order
                    "shapes": [[8, 2048], ...], "dtypes": [...], "layouts": [LAYOUT, ...],
                    "rules": ["..."]},                 # rows index these tables
      "selected": 0 | null,                            # the row shown when the page opens
      "diagnostics": [{"severity", "code", "message", "where", "help": [...]}, ...],
      "more_diagnostics": 0,                           # left out past MAX_DIAGNOSTICS
      "collectives": [{"kind", "axes", "count", "bytes", "group_size"}] | null,
      "largest": {"by_variable": [[path, bytes], ...], "by_rule": [...]} | null
    }

    BAR = {"label": "device memory", "parts": [{"kind": "parameters", "label": "...",
           "bytes": 123}, ...], "budget": int | null, "peak": int | null}
    LAYOUT = {"axes": [null | [axis, ...], ...], "text": "(model, batch)"}

Memory bars are drawn from whatever kinds the report carries: parameters always, the
optimizer slots of `budget(state = K)`, and device and host memory apart for a plan
whose memory the report itemises (`device_bytes`, `host_bytes` and each row's `memory`).
"""

from __future__ import annotations

import os

from planc.diagnostics.text import visible
from planc.ir import Dim, layout_text, named_layout_text
from planc.reports.stages import layers_text, summary_text
from planc.targets.cost.report import percent_text

__all__ = ["SCHEMA", "MAX_PAGE_VARIABLES", "MAX_DIAGNOSTICS", "shown", "explain_data",
           "aot_data"]

SCHEMA = "planc.page/1"
# Past this the page would be tens of megabytes and slow to open: `planc explain`
# refuses with P532 (the JSON and text reports have no such limit).
MAX_PAGE_VARIABLES = 100_000
# Devices the page draws one by one (a box each, and each variable's blocks per device):
# past this a mesh is listed by its axes. Chromium took over 150 s on 4096 x 4096.
MAX_DRAWN_DEVICES = 4096
MAX_DIAGNOSTICS = 1_000  # listed on the page; the rest are counted

_ROW_COLUMNS = ("path", "shape", "dtype", "layout", "shard", "per_device", "bytes", "rule",
                "problem")
# Added by a report that itemises device and host memory (optimizer `state` rules,
# `on host` layouts).
_ITEMISED_COLUMNS = ("memory", "state_layout", "state_per_device", "device_bytes",
                     "host_bytes")


def shown(text) -> str | None:
    """`text` as the page shows it: control and format characters (bidi overrides,
    zero-width marks, newlines) written as escapes, as the terminal output writes them."""
    if text is None:
        return None
    return visible(str(text)).replace("\n", "\\n")


def _message(text: str) -> str:
    """A multi-line message: its line breaks kept, every other invisible escaped."""
    return visible(text)


# -- explain ---------------------------------------------------------------------------------

def explain_data(doc: dict, *, slices: dict | None = None, distribution: str | None = None,
                 selected: str | None = None) -> dict:
    """The page's data for a `planc.explain/1` document; `slices` is `{axis: slices}` of
    the plan's mesh, `selected` the path of the variable the page opens on."""
    facts = [["file", shown(doc["file"])],
             ["devices", "auto: no --devices" if doc["devices"] is None else str(doc["devices"])],
             ["mesh", _mesh_text(doc["mesh"])]]
    if distribution:
        facts.append(["distribution", shown(distribution)])
    facts.append(["matching", f"match {doc['match']}, overlap {doc['overlap']}"])
    facts.append(["diagnostics", _counts_text(doc["counts"])])
    table = variables_table(doc["variables"], doc.get("file"))
    paths = [r["path"] for r in doc["variables"]]
    return {
        "schema": SCHEMA, "kind": "explain",
        "title": f"plan {shown(doc['plan'])}",
        "facts": facts,
        "mesh": _mesh(doc["mesh"], slices, doc["devices"],
                      laid_out=any("axes" in r for r in doc["variables"])),
        "memory": explain_memory(doc["summary"], doc["variables"]),
        "variables": table,
        "selected": _selected(paths, selected),
        **_diagnostics(doc["diagnostics"]),
        "collectives": None,
        "largest": None,
        "cost": None,
        "stages": _stages(doc.get("stages")),
    }


def _stages(staged: dict | None) -> dict | None:
    """The pipeline section: the pipeline in a line, and a row per stage, from the
    `stages` of a `planc.explain/1` document."""
    if staged is None:
        return None
    rows = [{"stage": r["stage"], "position": r["position"], "layers": layers_text(r["layers"]),
             "variables": r["variables"], "param_bytes": r["param_bytes"],
             "state_bytes": r["state_bytes"], "flops_per_token": r["flops_per_token"],
             "in_flight": r["in_flight_microbatches"]} for r in staged["stages"]]
    return {"summary": shown(summary_text(staged)), "rows": rows}


def _positions(rows: list | None) -> dict | None:
    """The pipeline section of a `planc.aot/1` document: a row per pipeline position,
    its stages and planc's analytic figures beside the compiled peak."""
    if not rows:
        return None
    return {"summary": "one SPMD program: the compiled peak is every position's; planc's "
                       "analytic figures say what each position holds",
            "positions": [{"position": r["position"], "stages": r["stages"],
                           "analytic_bytes": r["analytic_bytes"],
                           "analytic_peak": r.get("analytic_peak"), "peak": r["peak"],
                           "schedule_activation_bytes": r.get("schedule_activation_bytes")}
                          for r in rows]}


def _selected(paths: list[str], selected: str | None) -> int | None:
    if selected is not None and selected in paths:
        return paths.index(selected)
    return None


def explain_memory(summary: dict, rows: list[dict]) -> dict:
    """The bars of a `MEMORY` summary: device memory (and host memory, where the report
    itemises it) per device against the budget, and the ideal split beside it."""
    per_device = summary["per_device_bytes"]
    state = summary.get("state") or 1
    slots = f"optimizer state ({state - 1} slot{'s' if state != 2 else ''} per parameter)"
    notes = ["every device holds one shard of every variable: the same bytes on each"]
    if per_device is None:
        laid_out = any("axes" in r for r in rows)
        return {"bars": [], "notes": ["unknown: an `auto` axis has no size (pass --devices)"
                                      if laid_out else "unknown: the plan does not fit"]}
    bars = []
    if "device_bytes" in summary:  # itemised: device and host memory apart
        for where, total, budget in (("device", summary["device_bytes"],
                                      summary.get("budget_bytes")),
                                     ("host", summary.get("host_bytes"),
                                      summary.get("host_budget_bytes"))):
            if total is None:
                continue
            own = sum(r.get("bytes_per_device") or 0 for r in rows
                      if r.get("memory", "device") == where)
            parts = [_part("parameters", "parameters", own)]
            if total - own:
                parts.append(_part("state", slots, total - own))
            if total or budget is not None:
                bars.append(_bar(f"{where} memory", parts, budget))
    else:
        parts = [_part("parameters", "parameters", per_device)]
        if state > 1:
            parts.append(_part("state", slots, per_device * (state - 1)))
        bars.append(_bar("device memory", parts, summary.get("budget_bytes")))
    ideal = summary.get("ideal_bytes")
    if ideal is not None and summary.get("devices"):
        parts = [_part("parameters", "parameters", int(ideal))]
        if state > 1:
            parts.append(_part("state", slots, int(ideal) * (state - 1)))
        bars.append(_bar(f"ideal: total / {summary['devices']}", parts, None))
        if summary.get("overhead") is not None:
            notes.append(f"overhead {summary['overhead']:.2f}x the ideal: what is not split "
                         "over every device is held more than once")
    return {"bars": bars, "notes": notes}


def _part(kind: str, label: str, nbytes: int) -> dict:
    return {"kind": kind, "label": label, "bytes": int(nbytes)}


def _bar(label: str, parts: list[dict], budget: int | None, peak: int | None = None) -> dict:
    return {"label": label, "parts": parts, "budget": budget, "peak": peak}


def variables_table(rows: list[dict], plan_file: str | None) -> dict:
    """The variables as compact rows: shapes, dtypes, layouts and rules, which repeat
    across a model's layers, are stored once and indexed."""
    itemised = any("memory" in r for r in rows)
    columns = _ROW_COLUMNS + (_ITEMISED_COLUMNS if itemised else ())
    shapes, dtypes, layouts, rules = _Index(), _Index(), _Index(), _Index()
    out = []
    for r in rows:
        layout = (_layout(r["axes"], r["blocks"], logical=r.get("logical"))
                  if "axes" in r else None)
        row = [shown(r["path"]), shapes.add(r["shape"]), dtypes.add(shown(r["dtype"])),
               layouts.add(layout), shapes.add(r.get("shard_shape")),
               r.get("bytes_per_device"), r.get("bytes"),
               rules.add(_rule_text(r.get("rule"), plan_file) if "rule" in r else None),
               {"error": 2, "warning": 1}.get(r.get("problem"), 0)]
        if itemised:
            st = r.get("state") or {}
            row += [r.get("memory", "device"),
                    layouts.add(_layout(st["axes"], st["blocks"], st.get("memory", "device"))
                                if "axes" in st else None),
                    st.get("bytes_per_device"), r.get("device_bytes"), r.get("host_bytes")]
        out.append(row)
    return {"columns": list(columns), "rows": out, "shapes": shapes.items,
            "dtypes": dtypes.items, "layouts": layouts.items, "rules": rules.items}


class _Index:
    """Values stored once, in first-seen order; `add` gives a value's index (None stays
    None: an unknown shard shape, a row without a rule)."""

    def __init__(self):
        self.items: list = []
        self._at: dict = {}

    def add(self, value):
        if value is None:
            return None
        key = _key(value)
        at = self._at.get(key)
        if at is None:
            at = self._at[key] = len(self.items)
            self.items.append(value)
        return at


def _key(value):
    if isinstance(value, dict):
        return tuple((k, _key(v)) for k, v in sorted(value.items()))
    if isinstance(value, list):
        return tuple(_key(v) for v in value)
    return value


def _layout(axes: list, blocks: list, memory: str = "device", logical=None) -> dict:
    dims = [Dim.of(a, b) for a, b in zip(axes, blocks)]
    # The table has one memory column, the parameter's: a slot's memory is said in its
    # layout, as the plan writes it (`replicated on host`).
    on = "" if memory == "device" else f" on {memory}"
    if logical:  # each logical name beside its mesh axes, as `planc explain` writes it
        text = named_layout_text(dims, logical)
    else:
        text = layout_text(dims, replicated_word=True)
    return {"axes": [None if a is None else [shown(n) for n in ([a] if isinstance(a, str) else a)]
                     for a in axes],
            "text": shown(text + on)}


def _rule_text(rule: dict | None, plan_file: str | None) -> str:
    """`"pattern" at line 13` (of the plan), `default at common.kd:19` (an included
    file), or `no rule: replicated`."""
    if rule is None:
        return "no rule: replicated"
    where = "" if rule["file"] == plan_file else os.path.basename(rule["file"] or "")
    line = "" if rule["line"] is None else (f":{rule['line']}" if where else f"line {rule['line']}")
    at = where + line
    if rule.get("own_names"):
        return shown(f"its own logical names, through `axes` at {at}")
    if rule["pattern"] is None:
        return shown(f"default at {at}")
    return shown('"' + rule["pattern"].replace('"', '\\"') + f'" at {at}')


def _mesh(mesh: dict | None, slices: dict | None, devices: int | None,
          laid_out: bool = True) -> dict:
    """The mesh's axes, and its device count (None while a size is unknown); `note`
    says why the devices are not drawn."""
    slices = slices or {}
    axes = [{"name": shown(name), "size": size, "slices": slices.get(name, 1)}
            for name, size in (mesh or {}).items()]
    known = bool(axes) and all(a["size"] is not None for a in axes)
    total = 1
    for a in axes:
        total *= a["size"] or 1
    note = None
    if not known:
        note = (f"the mesh does not fit {devices} devices (see the diagnostics)"
                if devices is not None and not laid_out else
                "an `auto` axis has no size: pass --devices to see the devices")
    elif total > MAX_DRAWN_DEVICES:
        note = (f"{total:,} devices: more than the page draws one by one "
                f"({MAX_DRAWN_DEVICES:,}); each variable's layout is in its table, and "
                "`planc explain --var PATH` shows its blocks")
    return {"axes": axes, "devices": (total if known else None) if axes else devices,
            "note": note}


def _mesh_text(mesh: dict | None) -> str:
    if not mesh:
        return "unresolved"
    return shown(" x ".join(f"{k}={'auto' if v is None else v}" for k, v in mesh.items()))


def _counts_text(counts: dict) -> str:
    parts = [f"{counts[k]} {k if counts[k] != 1 else k[:-1]}" for k in ("errors", "warnings",
                                                                          "notes")]
    return ", ".join(parts)


def _diagnostics(diags: list[dict]) -> dict:
    out = []
    for d in diags[:MAX_DIAGNOSTICS]:
        where = shown(d["file"]) if d.get("file") else None
        if where and d.get("line") is not None:
            where += f":{d['line']}:{d['column']}"
        out.append({"severity": d["severity"], "code": d["code"],
                    "message": _message(d["message"]), "where": where,
                    "help": [_message(h) for h in d.get("help", [])]})
    return {"diagnostics": out, "more_diagnostics": max(0, len(diags) - MAX_DIAGNOSTICS)}


# -- aot -------------------------------------------------------------------------------------

_AOT_PARTS = (("arguments", "arguments", "argument", None),
              ("outputs", "outputs not aliased", "output", "alias"),
              ("temporaries", "temporaries", "temp", None),
              ("code", "generated code", "generated_code", None))
_AOT_HOST_PARTS = (("arguments", "host arguments", "host_argument", None),
                   ("outputs", "host outputs not aliased", "host_output", "host_alias"),
                   ("temporaries", "host temporaries", "host_temp", None))


def aot_data(doc: dict, *, explain: dict | None = None, slices: dict | None = None) -> dict:
    """The page's data for a `planc.aot/1` document (`AotReport.to_dict()` with its
    diagnostics); `explain` is the `planc.explain/1` document of the step's parameters,
    for the variables table. The compile time is left out: the page is the same for the
    same inputs."""
    what = (f"{doc['devices']} simulated CPU devices" if doc["platform"] == "cpu"
            else f"{doc['devices']} x {shown(doc['device_kind'])}")
    facts = [["file", shown(doc["file"])],
             ["topology", f"{shown(doc['topology'])} ({what}, {doc['slices']} "
                          f"slice{'s' if doc['slices'] != 1 else ''})"],
             ["mesh", _mesh_text(doc["mesh"])],
             ["donated", "params and opt_state" if doc["donate"] else "nothing"]]
    if doc["estimate"]:
        facts.append(["figures", "an estimate: XLA:CPU's, peak = arguments + outputs - "
                                 "aliased + temporaries"])
    budget = doc.get("budget")
    if budget is not None:
        facts.append(["budget(peak)", "fits" if budget["fits"] else "OVER BUDGET"])
    facts.append(["diagnostics", _counts_text(doc["summary"])])
    table = variables_table(explain["variables"], doc["file"]) if explain else \
        variables_table([], doc["file"])
    largest = doc["largest_arguments"]
    return {
        "schema": SCHEMA, "kind": "aot",
        "title": f"plan {shown(doc['plan'])} on {shown(doc['topology'])}",
        "facts": facts,
        "mesh": _mesh(doc["mesh"], slices, doc["devices"]),
        "memory": aot_memory(doc["memory"], budget["peak"] if budget else None,
                             doc["estimate"]),
        "variables": table,
        "selected": None,
        **_diagnostics(doc["diagnostics"]),
        "collectives": [{"kind": shown(c["kind"]),
                         "axes": None if c["axes"] is None else [shown(a) for a in c["axes"]],
                         "count": c["count"], "bytes": c["bytes"],
                         "group_size": c["group_size"]} for c in doc["collectives"]],
        "largest": {"by_variable": [[shown(e["path"]), e["bytes"]]
                                    for e in largest["by_variable"]],
                    "by_rule": [[shown(e["rule"]), e["bytes"]] for e in largest["by_rule"]]},
        "cost": None,
        "stages": _positions(doc.get("stages")),
    }


def cost_data(doc: dict, aot: dict, *, explain: dict | None = None,
              slices: dict | None = None) -> dict:
    """The page's data for a `planc.cost/1` document: the `planc.aot/1` page of the same
    compile (`aot`), with the time section: the bounds and the estimate, the MFU, the
    calibration, and the bottleneck terms with the variables and rules behind them."""
    out = aot_data(aot, explain=explain, slices=slices)
    out["kind"] = "cost"
    time = doc["time"]
    calibration = doc["calibration"]
    out["cost"] = {
        "time": [["lower", time["lower_s"]], ["estimate", time["estimate_s"]],
                 ["upper", time["upper_s"]]],
        "mfu": percent_text(doc["mfu"]),
        "chip": shown(doc["chip"]) + (" (a cpu:N compile priced as it)" if doc["estimate"]
                                      else ""),
        "calibration": ("none: the chip's peak rates, nothing overlapped" if calibration is None
                        else f"{shown(calibration['file'])} ({shown(calibration['chip'])})"),
        "exact": doc["exact"],
        "bottleneck": [{"term": shown(b["term"]), "share": percent_text(b["share"]),
                        "seconds": b["seconds"],
                        "variables": [shown(v) for v in b["variables"]],
                        "rules": [shown(r) for r in b["rules"]]} for b in doc["bottleneck"]],
    }
    out.update(_diagnostics(doc["diagnostics"]))
    return out


def aot_memory(memory: dict, budget: int | None, estimate: bool) -> dict:
    """XLA's per-device figures as bars: device memory with its peak against
    `budget(peak)`, and host memory when the step places anything there."""
    def parts(spec):
        out = []
        for kind, label, key, minus in spec:
            n = memory.get(key, 0) - (memory.get(minus, 0) if minus else 0)
            if n > 0:
                out.append(_part(kind, label, n))
        return out

    bars = [_bar("device memory", parts(_AOT_PARTS), budget, memory["peak"])]
    host = parts(_AOT_HOST_PARTS)
    if host:
        bars.append(_bar("host memory", host, None))
    notes = ["XLA's figures for one device of the compiled step: every device runs the "
             "same program"]
    if estimate:
        notes.append("peak: an estimate on XLA:CPU (arguments + outputs - aliased + "
                     "temporaries)")
    return {"bars": bars, "notes": notes}

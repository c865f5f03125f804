"""`planc explain`: the layout every variable gets, what it costs, and why.

    planc explain PLAN --model SRC [--devices N] [--var PATH] [--format text|json]

Text output is a table (one row per variable: path, shape, dtype, layout, per-device
shard shape, bytes per device, the rule that gave the layout), a memory summary, then
the diagnostics as `planc lint` prints them. `--var PATH` instead walks through the
resolution of one variable: every rule and whether it matches, which one won and why,
each alternative of its layout and why the earlier ones failed.

`--format json` writes one document, schema ``planc.explain/1``; other parts of planc
compare against it, so `axes` is exactly the resolver's::

    {
      "schema": "planc.explain/1",
      "plan": "gemma", "file": "plans/gemma.kd",
      "devices": 8,                        # null: an `auto` axis and no --devices
      "mesh": {"batch": 4, "model": 2},    # mesh order; null for an unresolved `auto`
      "match": "full", "overlap": "error",
      "variables": [VARIABLE, ...],        # as in planc.report/1 (see planc.report)
      "summary": MEMORY,                   # as in planc.report/1
      "diagnostics": [...],                # planc.diagnostics.formats.diagnostic_dict, sorted
      "counts": {"errors": 0, "warnings": 0, "notes": 0},
      "trace": TRACE                       # only with --var
    }

    TRACE = {
      "path": ..., "shape": [...], "dtype": ...,
      "rules": [{"file", "line", "pattern", "matches": bool,
                 "literal": bool,          # the pattern is exactly the path
                 "matches_other_mode": bool}],   # would it match under the other mode
      "default": {"file", "line", "layout"} | null,
      "reason": "literal" | "only" | "first" | "ambiguous" | "default" | "none"
                | "data_parallel",
      "why": "a sentence",
      "winner": {"file", "line", "pattern"} | null,
      "alternatives": [{"layout": "(model, _)", "status": "taken" | "failed" |
                        "not tried", "why": "a sentence" | null}],
      "taken": 0,                          # index into alternatives; -1 none fits; null no rule
      "axes": [...], "shard_shape": [...] | null, "bytes_per_device": int | null
    }

Exit codes as `planc lint`: 0 clean, 1 errors, 2 a bad command line or unreadable input.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import sys

from planc.diagnostics import Diagnostic
from planc.matching import Matcher
from planc.diagnostics import severity_counts
from planc.resolve.validate import Report, _shard_bytes, axes_json, human_bytes, validate
from planc.resolve.resolver import Resolver
from planc.variables import Variable

__all__ = ["run_explain", "trace"]

_MIN_PATH = 24  # narrowest the path column gets before the table is allowed to wrap


def run_explain(args) -> int:
    """Run `planc explain` for parsed `args`; returns the exit code."""
    from planc.cli.common import (UsageError, emit_diagnostics, exit_code, load, load_model,
                      parse_defines, parse_devices, use_color)

    defines = parse_defines(args.defines)
    counts = parse_devices(args.devices)
    if len(counts) > 1:
        raise UsageError(f"explain takes one device count, got `{args.devices}`; "
                         "use `planc lint --devices` to check several")
    devices = counts[0] if counts else None
    plan, found, sources = load(args.plan, defines, args.allow_include_outside)
    if plan is None:
        emit_diagnostics(found, sources, args)
        return exit_code(found)
    variables = load_model(args.model)
    var = _find(variables, args.var) if args.var is not None else None
    progress = args.format == "text" and sys.stderr.isatty()
    report = validate(plan, variables, devices, progress=progress)
    sources = {**sources, **report.sources}
    color = use_color(args.color, sys.stdout)

    if var is not None:
        diags, info = _trace_for(plan, report, var, devices)
        diags = sorted(list(found) + diags, key=Diagnostic.sort_key)
        if args.format == "json":
            doc = _document(plan, report, diags, [_row_for(report, var)])
            doc["trace"] = info
            sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        else:
            out = _Out(color)
            _print_header(out, plan, report)
            _print_trace(out, info)
            out.flush()
            emit_diagnostics(diags, sources, args)
        return exit_code(diags)

    diags = sorted(list(found) + list(report.diagnostics), key=Diagnostic.sort_key)
    if args.format == "json":
        doc = _document(plan, report, diags, report.variable_dicts())
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return exit_code(diags)
    rows = report.variable_dicts()
    out = _Out(color)
    _print_header(out, plan, report)
    if report.assignments:
        out.print(_table(rows, out.width, report.file))
        out.print()
        _print_summary(out, report)
    if diags:
        out.print()
    out.flush()
    if diags:
        emit_diagnostics(diags, sources, args)
    return exit_code(diags)


# -- JSON ------------------------------------------------------------------------------------

def _document(plan, report: Report, diags, variables: list[dict]) -> dict:
    from planc.diagnostics.formats import diagnostic_dict

    return {
        "schema": "planc.explain/1",
        "plan": report.plan_name,
        "file": report.file,
        "devices": report.devices,
        "mesh": dict(report.mesh),
        "match": plan.ir.match,
        "overlap": plan.ir.overlap,
        "variables": variables,
        "summary": report.memory.to_dict(),
        "diagnostics": [diagnostic_dict(d) for d in diags],
        "counts": severity_counts(diags),
    }


def _row_for(report: Report, var: Variable) -> dict:
    for row in report.variable_dicts():
        if row["path"] == var.path:
            return row
    return {"path": var.path, "shape": list(var.shape), "dtype": var.dtype}


# -- one variable ----------------------------------------------------------------------------

def _find(variables, path: str) -> Variable:
    from planc.cli.common import UsageError

    for v in variables:
        if v.path == path:
            return v
    close = difflib.get_close_matches(path, [v.path for v in variables], n=3, cutoff=0.6)
    hint = ("; did you mean " + ", ".join(f"`{c}`" for c in close) + "?") if close else \
        "; `planc inspect SRC` lists the variables"
    raise UsageError(f"the model has no variable `{path}`{hint}")


def _trace_for(plan, report: Report, var: Variable, devices):
    """(diagnostics to show, trace dict) for `var` under the report's binding."""
    binding = [d for d in report.diagnostics if d.code in ("P201", "P118", "P122", "P202")]
    if not report.assignments:  # the plan does not fit the device count
        return binding, None
    resolver = Resolver(report.ir)
    _, problems = resolver.resolve(var)
    if devices is not None:
        from dataclasses import replace

        problems = [replace(d, devices=devices) for d in problems]
    return binding + problems, trace(resolver, var)


def trace(resolver: Resolver, var: Variable) -> dict:
    """How `resolver` resolves `var`, step by step (the TRACE object of the schema)."""
    ir = resolver.ir
    path = var.path
    other_mode = "search" if ir.match == "full" else "full"
    patterns = [r.pattern for r in resolver.rules]
    other = Matcher(patterns, other_mode).match(path) if patterns else ()
    hits = resolver.matcher.match(path)
    literal = resolver.matcher.literal(path)
    rules = []
    for r in resolver.rules:
        rules.append({**_where(r), "matches": r.index in hits, "literal": r.index == literal,
                      "matches_other_mode": r.index in other})
    default = resolver.default
    winner, reason, why = _winner(resolver, var, hits, literal)
    info = {
        "path": path, "shape": list(var.shape), "dtype": var.dtype,
        "match": ir.match, "overlap": ir.overlap,
        "rules": rules,
        "default": None if default is None else {**_where(default),
                                                  "layout": default.layout.text},
        "reason": reason, "why": why,
        "winner": None if winner is None else _where(winner),
        "alternatives": [], "taken": None,
    }
    assignment, _ = resolver.resolve(var)
    if winner is not None:
        info["alternatives"], info["taken"] = _alternatives(resolver, winner, var)
    layout = assignment.layout
    info["axes"] = axes_json(layout.axes)
    info["layout"] = layout.text
    info["blocks"] = list(layout.blocks)
    shard = layout.shard_shape(var.shape, resolver.sizes)
    info["shard_shape"] = None if shard is None else list(shard)
    info["bytes_per_device"] = None if shard is None else _shard_bytes(shard, var.dtype)
    return info


def _where(rule) -> dict:
    span = rule.span
    return {"file": span.file if span else None, "line": span.line if span else None,
            "pattern": rule.pattern}


def _winner(resolver: Resolver, var: Variable, hits, literal):
    ir = resolver.ir
    rules = resolver.rules
    if literal is not None:
        others = len([i for i in hits if i != literal])
        extra = (f"; it wins over the {others} other matching rule{'s' if others > 1 else ''}, "
                 "as a Keras exact key does") if others else ""
        return rules[literal], "literal", f"the pattern is exactly the path{extra}"
    if not hits:
        if resolver.default is not None:
            return resolver.default, "default", "no rule matches: `default` applies"
        if resolver.block == "layout" and ir.distribution == "data_parallel":
            return None, "data_parallel", "`data_parallel` replicates every variable"
        sev = "an error (P301)" if var.rank >= 2 else "a note (P301)"
        return (None, "none", "no rule matches and there is no `default`: the variable stays "
                f"replicated, reported as {sev}")
    if len(hits) == 1:
        return rules[hits[0]], "only", "the only rule that matches"
    if ir.overlap == "first":
        return (rules[hits[0]], "first", f"the first of {len(hits)} matching rules "
                "(`overlap first`)")
    return (rules[hits[0]], "ambiguous", f"{len(hits)} rules match under `overlap error`: an "
            "error (P302); the first is used so the checks can go on")


def _alternatives(resolver: Resolver, rule, var: Variable):
    from planc.ir import layout_text

    out = []
    taken = -1
    for i, alt in enumerate(rule.layout.alternatives):
        text = layout_text(alt)
        if taken >= 0:
            out.append({"layout": text, "status": "not tried", "why": None})
            continue
        dims = alt.expand(var.rank)
        if dims is None:
            out.append({"layout": text, "status": "failed",
                        "why": f"needs {alt.rank_text}, the variable has rank {var.rank}"})
            continue
        bad = resolver._indivisible(dims, var.shape)
        if bad is not None:
            out.append({"layout": text, "status": "failed",
                        "why": resolver._indivisible_text(alt, var, bad)})
            continue
        taken = i
        unknown = sorted({a for d in dims for a in d.axes if resolver.sizes.get(a) is None})
        why = (f"divisibility over {', '.join(f'`{a}`' for a in unknown)} not checked: its "
               "size is `auto` (pass --devices)") if unknown else None
        out.append({"layout": text, "status": "taken", "why": why})
    return out, taken


# -- text ------------------------------------------------------------------------------------

class _Out:
    """A rich console that renders into a buffer, so `flush` can write the text with
    trailing blanks removed: rich pads table cells, and piped output should not keep it."""

    def __init__(self, color: bool):
        from io import StringIO

        from rich.console import Console

        self.buf = StringIO()
        if sys.stdout.isatty():
            width = shutil.get_terminal_size((100, 24)).columns
            self.console = Console(file=self.buf, force_terminal=color, no_color=not color,
                                   width=width, highlight=False)
        else:
            # Piped: as wide as the content, whatever the environment says.
            self.console = Console(file=self.buf, force_terminal=color, no_color=not color,
                                   color_system="standard" if color else None,
                                   width=100_000, highlight=False, soft_wrap=True)
        self.width = self.console.width

    def print(self, *objects, **kw) -> None:
        self.console.print(*objects, **kw)

    def flush(self) -> None:
        text = _strip_trailing(self.buf.getvalue())
        self.buf.seek(0)
        self.buf.truncate()
        sys.stdout.write(text)
        sys.stdout.flush()


_TRAILING = re.compile(r"(?:[ \t]|\x1b\[[0-9;]*m)+$", re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _strip_trailing(text: str) -> str:
    """Trailing blanks removed from every line; colour codes among them are kept."""
    return _TRAILING.sub(lambda m: "".join(_ANSI.findall(m.group(0))), text)


def _print_header(console, plan, report: Report) -> None:
    from rich.text import Text

    mesh = " x ".join(f"{k}={'auto' if v is None else v}" for k, v in report.mesh.items())
    head = Text()
    head.append(f"plan {report.plan_name}", style="bold")
    head.append(f"  ({report.file})", style="dim")
    line = Text(f"mesh {mesh}")
    if report.devices:
        line.append(f" = {report.devices} devices")
    line.append(f"   {plan.ir.distribution}   match {plan.ir.match}, overlap {plan.ir.overlap}",
                style="dim")
    console.print(head)
    console.print(line)
    console.print()


def _shape(shape) -> str:
    return "?" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def _rule_cell(row: dict, plan_file: str | None = None) -> str:
    """`file:line` of the rule; just `:line` when short and the rule is in `plan_file`."""
    rule = row["rule"]
    if rule is None:
        return "-"
    if rule["pattern"] is None:
        return "default"
    if plan_file is not None and rule["file"] == plan_file:
        return f":{rule['line']}"
    return f"{os.path.basename(rule['file'] or '')}:{rule['line']}"


def _layout_cell(row: dict) -> str:
    axes, blocks = row["axes"], row["blocks"]
    if not axes:
        return "()"
    if all(a is None for a in axes):
        return "replicated"
    parts = []
    for a, b in zip(axes, blocks):
        if a is None:
            parts.append("_")
            continue
        name = a if isinstance(a, str) else "(" + ", ".join(a) + ")"
        parts.append(name + (f"[{b}]" if b != 1 else ""))
    return "(" + ", ".join(parts) + ")"


def _elide(path: str, limit: int) -> str:
    """`path` cut to `limit` characters: its head up to the first numbered part (the
    layer index tells rows apart), an ellipsis, then as much of its end as fits."""
    if len(path) <= limit:
        return path
    m = _HEAD.match(path)
    head = m.group(0) if m else ""
    if not head or len(head) > limit * 3 // 5:
        head = path[:(limit - 1) * 2 // 5]
    tail = limit - len(head) - 1
    return head + "…" + path[len(path) - tail:]


# Up to the end of the first path part (split at / or .) that holds a number, else the
# first part.
_HEAD = re.compile(r"(?:[^/.]*[/.])*?[^/.\d]*\d+[^/.]*[/.]|[^/.]+[/.]")


def _table(rows: list[dict], width: int, plan_file: str):
    """The variables table, compacted step by step until it fits `width` columns."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    dtypes = {row["dtype"] for row in rows}
    # Each level gives up a little: the dtype column when all agree (said in a caption),
    # brackets around shapes, the file name in front of rule lines.
    for level in range(4):
        drop_dtype = level >= 1 and len(dtypes) == 1
        shape = _shape if level < 2 else _short_shape
        short_rule = level >= 3
        headers = ["variable", "shape", "dtype", "layout", "shard", "per device", "rule"]
        cells = [[row["path"], shape(row["shape"]), row["dtype"], _layout_cell(row),
                  shape(row["shard_shape"]), human_bytes(row["bytes_per_device"]),
                  _rule_cell(row, plan_file if short_rule else None)] for row in rows]
        if drop_dtype:
            del headers[2]
            for c in cells:
                del c[2]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
        room = width - (sum(widths[1:]) + 2 * (len(headers) - 1))
        if room >= widths[0]:
            break
    if widths[0] > room:
        # Too narrow for whole paths: cut them in the middle, where a path says least.
        limit = max(_MIN_PATH, room)
        for c in cells:
            c[0] = _elide(c[0], limit)

    caption = f"every variable is {next(iter(dtypes))}" if drop_dtype else None
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                  header_style="bold", highlight=False, caption=caption,
                  caption_justify="left", caption_style="dim")
    right = {"shape", "shard", "per device"}
    for h in headers:
        table.add_column(h, no_wrap=True, overflow="ellipsis",
                         justify="right" if h in right else "left",
                         style="dim" if h == "rule" else None)
    layout_at = headers.index("layout")
    for row, c in zip(rows, cells):
        texts = [Text(x) for x in c]
        if row["replicated"] and row["shape"]:
            texts[layout_at].stylize("dim")
        table.add_row(*texts)
    return table


def _short_shape(shape) -> str:
    return "?" if shape is None else ("x".join(str(d) for d in shape) or "scalar")


def _print_summary(console, report: Report) -> None:
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in report.summary_lines():
        grid.add_row(label, value)
    console.print(grid)


def _print_trace(console, info: dict | None) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    if info is None:
        return
    head = Text()
    head.append(info["path"], style="bold")
    head.append(f"  {_shape(info['shape'])} {info['dtype']}")
    console.print(head)
    console.print()
    other = "search" if info["match"] == "full" else "full"
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
                  header_style="bold", highlight=False, title="rules, in file order",
                  title_justify="left", title_style="bold")
    table.add_column("rule", no_wrap=True, style="dim")
    table.add_column("pattern", overflow="fold")
    table.add_column("matches", no_wrap=True)
    winner = info["winner"]
    for r in info["rules"]:
        if r["literal"]:
            verdict = "exact path"
        elif r["matches"]:
            verdict = "yes"
        else:
            verdict = "no"
            if r["matches_other_mode"]:
                verdict += f" (would under `match {other}`)"
        is_winner = winner is not None and winner["file"] == r["file"] and \
            winner["line"] == r["line"] and winner["pattern"] == r["pattern"]
        style = "bold green" if is_winner else ("" if r["matches"] else "dim")
        mark = "  <- wins" if is_winner else ""
        table.add_row(f"{os.path.basename(r['file'] or '')}:{r['line']}",
                      Text('"' + r["pattern"].replace('"', '\\"') + '"', style=style),
                      Text(verdict + mark, style=style))
    d = info["default"]
    if d is not None:
        is_winner = info["reason"] == "default"
        table.add_row(f"{os.path.basename(d['file'] or '')}:{d['line']}",
                      Text("default", style="bold green" if is_winner else "dim"),
                      Text(("applies" + "  <- wins") if is_winner else "not needed",
                           style="bold green" if is_winner else "dim"))
    if info["rules"] or d is not None:
        console.print(table)
    else:
        console.print(Text("no rules", style="dim"))
    console.print(Text.assemble(("decision: ", "bold"), info["why"]))
    if info["alternatives"]:
        console.print()
        console.print(Text("layout alternatives", style="bold"))
        for i, alt in enumerate(info["alternatives"]):
            status = alt["status"]
            style = {"taken": "bold green", "failed": "red", "not tried": "dim"}[status]
            line = Text(f"  {i + 1}. ")
            line.append(alt["layout"], style="bold")
            line.append(f"  {status}", style=style)
            if alt["why"]:
                line.append(f": {alt['why']}")
            console.print(line)
        if info["taken"] == -1:
            console.print(Text("  none fits: the variable stays replicated, an error "
                               "(below)", style="red"))
    console.print()
    result = Text.assemble(("result: ", "bold"), (_layout_cell(info), "bold"))
    result.append(f"   shard {_shape(info['shard_shape'])}"
                  f"   {human_bytes(info['bytes_per_device'])} per device")
    console.print(result)
    console.print()

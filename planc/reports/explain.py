"""The explain document and tables: the layout every variable gets, what it costs, and why.

`planc explain` (`planc.cli.explain`) writes them. Text output is a table (one row per
variable: path, shape, dtype, layout, per-device shard shape, bytes per device, the rule
that gave the layout), a memory summary, then the diagnostics as `planc lint` prints them.
For a plan with `state` rules or `on host` layouts the table has a `state` column (the
layout of the variable's optimizer slots) and, in place of bytes per device, the bytes
per device in device and in host memory, the K - 1 slots of `budget(state = K)` included.
`--var PATH` instead shows the trace of one variable (`planc.resolve.tracing`): every rule
and whether it matches, which one won and why, each alternative of its layout and why
the earlier ones failed.

`--format json` writes one document, schema ``planc.explain/1``; other parts of planc
compare against it, so `axes` is exactly the resolver's::

    {
      "schema": "planc.explain/1",
      "plan": "gemma", "file": "plans/gemma.kd",
      "devices": 8,                        # null: an `auto` axis and no --devices
      "mesh": {"batch": 4, "model": 2},    # mesh order; null for an unresolved `auto`
      "match": "full", "overlap": "error",
      "variables": [VARIABLE, ...],        # as in planc.report/1 (see planc.resolve.report),
                                           # plus "problem": "error" | "warning" on a row
                                           # a diagnostic of that severity concerns
      "summary": MEMORY,                   # as in planc.report/1
      "diagnostics": [...],                # planc.diagnostics.formats.diagnostic_dict, sorted
      "counts": {"errors": 0, "warnings": 0, "notes": 0},
      "trace": TRACE | null                # only with --var; null: the plan does not fit
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
"""

from __future__ import annotations

import os
import re
import shutil
import sys

from planc.diagnostics import severity_counts
from planc.diagnostics.text import counted, visible
from planc.ir import Dim, layout_text, named_layout_text
from planc.resolve import Report, human_bytes, variable_dict
from planc.variables import Variable

__all__ = ["document", "flagged", "trace_text", "variable_row", "variables_pieces",
           "variables_text"]



# -- JSON ------------------------------------------------------------------------------------

def document(plan, report: Report, diagnostics, variables: list[dict]) -> dict:
    """The `planc.explain/1` document (without its `trace`) of `report` on `plan`:
    `variables` are its rows, `diagnostics` the sorted diagnostics to show."""
    from planc.diagnostics.formats import diagnostic_dict

    return {
        "schema": "planc.explain/1",
        "plan": report.plan_name,
        "file": report.file,
        "devices": report.devices,
        "mesh": dict(report.mesh),
        "match": plan.ir.match,
        "overlap": plan.ir.overlap,
        "variables": _with_problems(variables, flagged(diagnostics)),
        "summary": report.memory.to_dict(),
        "diagnostics": [diagnostic_dict(d) for d in diagnostics],
        "counts": severity_counts(diagnostics),
        **({"stages": report.stages.to_dict()} if report.stages is not None else {}),
    }


def flagged(diagnostics) -> dict[str, str]:
    """`{path: "error" | "warning"}` for each variable an error or a warning concerns
    (every variable of a grouped one); the error wins where both do."""
    out: dict[str, str] = {}
    for d in diagnostics:
        if d.severity.value not in ("error", "warning"):
            continue
        for path in d.variables or ((d.variable,) if d.variable else ()):
            if out.get(path) != "error":
                out[path] = d.severity.value
    return out


def _with_problems(rows: list[dict], problems: dict[str, str]) -> list[dict]:
    if not problems:
        return rows
    return [{**row, "problem": problems[row["path"]]} if row["path"] in problems else row
            for row in rows]


def _marks(paths: list[str], problems: dict[str, str]) -> list[str] | None:
    """The mark column, a row per path: `E` on a row in error, `W` on one with a warning;
    None when no row has either (the table is then as it always was)."""
    if not any(path in problems for path in paths):
        return None
    return [_MARK.get(problems.get(path), "") for path in paths]


_MARK = {"error": "E", "warning": "W"}


def variable_row(report: Report, var: Variable) -> dict:
    """The `VARIABLE` row of `var` in `report`; path, shape and dtype alone when the
    report has no assignments (the plan does not fit the device count)."""
    for row in report.variable_dicts():
        if row["path"] == var.path:
            return row
    return {"path": var.path, "shape": list(var.shape), "dtype": var.dtype}


# -- text ------------------------------------------------------------------------------------

def variables_text(plan, report: Report, color: bool) -> str:
    """The header, the variables table and the memory summary, for standard output."""
    return "".join(variables_pieces(plan, report, color))


def variables_pieces(plan, report: Report, color: bool) -> list[str]:
    """`variables_text` in pieces that join into it: a 100k-variable table is written out
    without a copy of the whole text."""
    out = _Out(color)
    _print_header(out, plan, report)
    if report.assignments:
        problems = flagged(report.diagnostics)
        if out.plain and report.kinds is None:
            # Straight from the assignments: the JSON rows (`variable_dicts`, a dict and
            # five lists a variable) were most of explain's time and memory at 100k
            # variables (bench/cli_latency.py, explain against lint).
            paths = [a.variable.path for a in report.assignments]
            out.write(*_plain_pieces(_report_cells(report), _marks(paths, problems)))
        elif out.plain:
            # An itemised plan's rows (state rules, `on host`) have the columns of
            # `_columns`, made from the JSON rows.
            rows = report.variable_dicts()
            marks = _marks([row["path"] for row in rows], problems)
            out.write(_plain_table(rows, report.file, marks))
        else:
            rows = report.variable_dicts()
            marks = _marks([row["path"] for row in rows], problems)
            out.print(_table(rows, out.width, report.file, marks))
        out.print()
        _print_summary(out, report)
        if report.stages is not None:
            out.print()
            from planc.reports.stages import table_text  # a plan with stages only

            out.write(table_text(report.stages.to_dict()))
    return out.pieces()


def trace_text(plan, report: Report, info: dict | None, color: bool) -> str:
    """The header and one variable's trace (`planc.resolve.tracing`), for standard output;
    just the header when there is no trace."""
    out = _Out(color)
    _print_header(out, plan, report)
    _print_trace(out, info)
    return out.text()


# -- rendering -------------------------------------------------------------------------------

class _Out:
    """A rich console that renders into a buffer, so `text` can give it with trailing
    blanks removed: rich pads table cells, and piped output should not keep it.

    Piped and colourless (`plain`), the explain table, its header and summary are laid
    out here, as rich lays them out at this width, and rich is never imported: it was
    most of what `planc explain` spent beyond `planc lint` (bench/explain_405b.py).
    """

    def __init__(self, color: bool):
        self.color = color
        self.parts: list[str] = []
        self.tty = sys.stdout.isatty()
        self.plain = not color and not self.tty
        # Piped: as wide as the content, whatever the environment says.
        self.width = shutil.get_terminal_size((100, 24)).columns if self.tty else _PIPED_WIDTH
        self._console = None

    @property
    def console(self):
        if self._console is None:
            from io import StringIO

            from rich.console import Console

            self.buf = StringIO()
            if self.tty:
                # TERM=dumb under `--color always`: rich would find no colours to use.
                system = None if not self.color else \
                    "standard" if os.environ.get("TERM") == "dumb" else "auto"
                self._console = Console(file=self.buf, force_terminal=self.color,
                                        no_color=not self.color, color_system=system,
                                        width=self.width, highlight=False)
            else:
                self._console = Console(file=self.buf, force_terminal=self.color,
                                        no_color=not self.color,
                                        color_system="standard" if self.color else None,
                                        width=self.width, highlight=False, soft_wrap=True)
        return self._console

    def print(self, *objects, **kw) -> None:
        if self.plain and not objects and not kw:  # a blank line
            self.write("\n")
            return
        self.console.print(*objects, **kw)

    def write(self, *texts: str) -> None:
        """Add text laid out already (no trailing blanks to strip)."""
        self._flush()
        self.parts.extend(texts)

    def _flush(self) -> None:
        if self._console is None:
            return
        rendered = self.buf.getvalue()
        if rendered:
            self.parts.append(_strip_trailing(rendered))
            self.buf.seek(0)
            self.buf.truncate()

    def text(self) -> str:
        return "".join(self.pieces())

    def pieces(self) -> list[str]:
        self._flush()
        return self.parts


_PIPED_WIDTH = 100_000

_TRAILING = re.compile(r"(?:[ \t]|\x1b\[[0-9;]*m)+$", re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _strip_trailing(text: str) -> str:
    """Trailing blanks removed from every line; colour codes among them are kept."""
    return _TRAILING.sub(lambda m: "".join(_ANSI.findall(m.group(0))), text)


def _print_header(console, plan, report: Report) -> None:
    mesh = " x ".join(f"{k}={'auto' if v is None else v}" for k, v in report.mesh.items())
    if console.plain:
        devices = f" = {counted(report.devices, 'device')}" if report.devices else ""
        console.write(f"{visible(f'plan {report.plan_name}')}{visible(f'  ({report.file})')}\n"
                      f"mesh {mesh}{devices}   {plan.ir.distribution}   match "
                      f"{plan.ir.match}, overlap {plan.ir.overlap}\n\n")
        return
    from rich.text import Text

    head = Text()
    head.append(visible(f"plan {report.plan_name}"), style="bold")
    head.append(visible(f"  ({report.file})"), style="dim")
    line = Text(f"mesh {mesh}")
    if report.devices:
        line.append(f" = {counted(report.devices, 'device')}")
    line.append(f"   {plan.ir.distribution}   match {plan.ir.match}, overlap {plan.ir.overlap}",
                style="dim")
    console.print(head)
    console.print(line)
    console.print()


def _bracketed_shape(shape) -> str:
    """`[8, 2048]`; `?` for an unknown shape."""
    return "?" if shape is None else "[" + ", ".join(str(d) for d in shape) + "]"


def _rule_cell(row: dict, plan_file: str | None = None) -> str:
    """`file:line` of the rule; just `:line` when short and the rule is in `plan_file`."""
    rule = row["rule"]
    if rule is None:
        return "-"
    if rule.get("own_names"):
        return "own names"
    if rule["pattern"] is None:
        return "default"
    if plan_file is not None and rule["file"] == plan_file:
        return f":{rule['line']}"
    return f"{os.path.basename(rule['file'] or '')}:{rule['line']}"


def _layout_cell(row: dict) -> str:
    """`(model, _)`; `replicated` when no dimension is split, `()` for a scalar; ` on
    host` after a layout in host memory."""
    dims = [Dim.of(a, b) for a, b in zip(row["axes"], row["blocks"])]
    logical = row.get("logical")
    if logical:  # each logical name beside the mesh axes it took: `(embed:fsdp, mlp:tp)`
        text = named_layout_text(dims, logical)
        return text + " on host" if row.get("memory") == "host" else text
    text = layout_text(dims, replicated_word=True)
    return text + " on host" if row.get("memory") == "host" else text


def _columns(rows: list[dict]):
    """(headers, right-justified headers, cells of a row): the table's columns, with a
    `state` column and bytes by memory for an itemised plan's rows."""
    if rows and "state" in rows[0]:
        headers = ("variable", "shape", "dtype", "layout", "state", "shard", "device", "host",
                   "rule")

        def extra(row):
            return (_layout_cell(row["state"]), human_bytes(row["device_bytes"]),
                    human_bytes(row["host_bytes"]))
        return headers, {"shape", "shard", "device", "host"}, extra
    headers = ("variable", "shape", "dtype", "layout", "shard", "per device", "rule")
    return headers, {"shape", "shard", "per device"}, None


def _row_cells(row: dict, extra, shape, rule: str) -> list[str]:
    """A row's cells in `_columns` order; `shape` writes a shape, `rule` is its rule cell."""
    head = [visible(row["path"]), shape(row["shape"]), row["dtype"], _layout_cell(row)]
    if extra is None:
        return head + [shape(row["shard_shape"]), human_bytes(row["bytes_per_device"]), rule]
    state, device, host = extra(row)
    return head + [state, shape(row["shard_shape"]), device, host, rule]


# What goes, in this order, when the table is wider than the terminal: the path never is
# cut (it is what a reader looks for), the other columns give way.
_DROPPED = ("rule", "shard", "shape")
_NARROWEST_REST = 24  # the mark, a wrapped layout and bytes per device, with their gaps


def _table(rows: list[dict], width: int, plan_file: str, marks: list[str] | None = None):
    """The variables table, compacted step by step until it fits `width` columns: the
    dtype column when all agree (said in a caption), brackets around shapes, the file
    name in front of rule lines, then whole columns (`_DROPPED`); a path wider than
    what is left wraps, whole."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    dtypes = {row["dtype"] for row in rows}
    for level in range(4 + len(_DROPPED)):
        drop_dtype = level >= 1 and len(dtypes) == 1
        shape = _bracketed_shape if level < 2 else _compact_shape
        short_rule = level >= 3
        dropped = _DROPPED[:max(0, level - 3)]
        named, right, extra = _columns(rows)
        headers = list(named)
        cells = [_row_cells(row, extra, shape,
                            visible(_rule_cell(row, plan_file if short_rule else None)))
                 for row in rows]
        gone = {"dtype"} if drop_dtype else set()
        gone.update(dropped)
        keep = [i for i, h in enumerate(headers) if h not in gone]
        headers = [headers[i] for i in keep]
        cells = [[c[i] for i in keep] for c in cells]
        if marks is not None:
            headers.insert(0, "!")
            for c, m in zip(cells, marks):
                c.insert(0, m)
        at = headers.index("variable")
        widths = [max(len(h), *(_cells(c[i]) for c in cells)) for i, h in enumerate(headers)]
        room = width - (sum(w for i, w in enumerate(widths) if i != at)
                        + 2 * (len(headers) - 1))
        if room >= widths[at]:
            break

    notes = []
    if drop_dtype:
        notes.append(f"every variable is {next(iter(dtypes))}")
    if dropped:
        notes.append(f"left out to fit {width} columns: {', '.join(dropped)}")
    if marks is not None:
        notes.append("! E: in error, W: a warning (see below)")
    caption = "; ".join(notes) or None
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                  header_style="bold", highlight=False, caption=caption,
                  caption_justify="left", caption_style="dim")
    # Still too wide with every column that may go gone: the layout wraps; the path
    # wraps too (whole, over two lines) only when it alone nearly fills the width.
    squeezed = widths[at] > room
    wrapping = {"layout"} if squeezed else set()
    if squeezed and widths[at] > width - _NARROWEST_REST:
        wrapping.add("variable")
    for h in headers:
        wrap = h in wrapping
        table.add_column(h, no_wrap=not wrap, overflow="fold" if wrap else "ellipsis",
                         justify="right" if h in right else "left",
                         style={"rule": "dim", "!": "bold red"}.get(h))
    layout_at = headers.index("layout")
    if "variable" in wrapping:
        for c in cells:
            c[at] = broken_at_slashes(c[at], room)
    state_at = headers.index("state") if "state" in headers else None
    for row, c in zip(rows, cells):
        texts = [Text(x) for x in c]
        if row["replicated"] and row["shape"]:
            texts[layout_at].stylize("dim")
        if state_at is not None and row["state"]["rule"] is None:
            texts[state_at].stylize("dim")  # the slots mirror the variable
        table.add_row(*texts)
    return table


def _plain_table(rows: list[dict], plan_file: str, marks: list[str] | None = None) -> str:
    """The variables table as `_table` lays it out with room for every column, in plain
    text: a header, a rule, a row per variable, columns two spaces apart."""
    headers, right_named, extra = _columns(rows)
    # Large models repeat a few shapes and layouts many times: render each once.
    shapes: dict = {}
    layouts: dict = {}

    def shape_of(shape) -> str:
        key = None if shape is None else tuple(shape)
        text = shapes.get(key)
        if text is None:
            text = shapes[key] = _bracketed_shape(shape)
        return text

    def layout_of(row) -> str:
        key = (tuple(map(_hashable, row["axes"])), tuple(row["blocks"]), row.get("memory"),
               tuple(row.get("logical") or ()))
        text = layouts.get(key)
        if text is None:
            text = layouts[key] = _layout_cell(row)
        return text

    if extra is None:
        cells = [(visible(row["path"]), shape_of(row["shape"]), row["dtype"], layout_of(row),
                  shape_of(row["shard_shape"]), human_bytes(row["bytes_per_device"]),
                  visible(_rule_cell(row))) for row in rows]
    else:
        cells = [tuple(_row_cells(row, extra, shape_of, visible(_rule_cell(row))))
                 for row in rows]
    right = tuple(h in right_named for h in headers)
    return "".join(_plain_pieces(cells, marks, headers, right))


def _report_cells(report: Report) -> list[tuple]:
    """The plain table's cells, a row per assignment, as `_plain_table` makes them from
    `report.variable_dicts()`: every cell but the path once per distinct (layout, rule,
    shape, dtype, shard, bytes), the layout and rule cells from that one's JSON row
    (`variable_dict`). A model's variables repeat a few dozen such rows."""
    done: dict = {}
    cells = []
    append = cells.append
    for a, shard, per_device in zip(report.assignments, report.shard_shapes,
                                    report.bytes_per_device):
        v = a.variable
        # ids: the layout and rule objects outlive this loop
        key = (id(a.layout), id(a.rule), v.shape, v.dtype, shard, per_device)
        rest = done.get(key)
        if rest is None:
            row = variable_dict(a, shard, per_device)
            rest = done[key] = (_bracketed_shape(v.shape), v.dtype, _layout_cell(row),
                                "?" if shard is None else _bracketed_shape(shard),
                                human_bytes(per_device), visible(_rule_cell(row)))
        append((visible(v.path), *rest))
    return cells


_HEADERS = ("variable", "shape", "dtype", "layout", "shard", "per device", "rule")
_RIGHT = (False, True, False, False, True, True, False)


def _plain_layout(cells: list[tuple], marks: list[str] | None) -> str:
    """The plain table of `cells` (a tuple of texts per row, `_plain_table`'s columns)."""
    return "".join(_plain_pieces(cells, marks))


def _plain_pieces(cells: list[tuple], marks: list[str] | None, headers: tuple = _HEADERS,
                  right: tuple = _RIGHT) -> list[str]:
    """`_plain_layout`'s text in pieces that join into it; `headers` and which of them are
    right-justified (`right`) name the cells' columns (an itemised plan's rows have more)."""
    if marks is not None:
        headers, right = ("!", *headers), (False, *right)
    # A column at a time (`zip(*cells)`), read by `map`: generators over the rows were a
    # tenth of an explain of 100k variables (bench 10). Only the path and rule columns
    # can hold text that is not ASCII.
    columns = list(zip(*cells)) if cells else [()] * (len(headers) - (marks is not None))
    ascii_only = not cells or (all(map(str.isascii, columns[0]))
                               and all(map(str.isascii, columns[-1])))
    if marks is not None:
        cells = [(m, *c) for m, c in zip(marks, cells)]
        columns = [tuple(marks), *columns] if cells else [(), *columns]
    width = len if ascii_only else _cells
    widths = [max(len(h), *map(width, column)) if column else len(h)
              for h, column in zip(headers, columns)]
    del columns  # a reference per cell: not kept while the text is built
    # One format per row: left- or right-justified fields two spaces apart.
    if ascii_only:
        fmt = "  ".join(f"{{:{'>' if r else '<'}{w}}}" for w, r in zip(widths, right)).format

        def line(values) -> str:
            return fmt(*values).rstrip()
    else:
        def line(values) -> str:
            parts = []
            for v, w, r in zip(values, widths, right):
                pad = " " * (w - _cells(v))
                parts.append(pad + v if r else v + pad)
            return "  ".join(parts).rstrip()
    rule = "\u2500" * (sum(widths) + 2 * (len(widths) - 1))
    # In pieces: the rule's box-drawing character would make one joined string take two
    # bytes a character, and rows joined a block at a time never hold a list of them all.
    out = [line(headers) + "\n" + rule + "\n"]
    for start in range(0, len(cells), _BLOCK):
        out.append("".join([line(c) + "\n" for c in cells[start:start + _BLOCK]]))
    if marks is not None:
        out.append("! E: in error, W: a warning (see below)\n")
    return out


_BLOCK = 4096  # rows joined into one piece of the plain table


def _hashable(entry):
    return tuple(entry) if isinstance(entry, list) else entry


def _cells(text: str) -> int:
    """Terminal columns `text` takes (a CJK character takes two), as rich counts them."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def broken_at_slashes(text: str, width: int) -> str:
    """`text` with a line break after a `/` wherever a line would pass `width` columns:
    a path wraps between its segments, never inside a name (a segment wider than
    `width` on its own is left to the renderer to fold).

    >>> print(broken_at_slashes("decoder_block_0/attention/query/kernel", 20))
    decoder_block_0/
    attention/query/
    kernel
    """
    out = []
    for line in text.split("\n"):
        if _cells(line) <= width:
            out.append(line)
            continue
        current = ""
        for part in re.split(r"(?<=/)", line):
            if current and _cells(current + part) > width:
                out.append(current)
                current = part
            else:
                current += part
        out.append(current)
    return "\n".join(out)


def _compact_shape(shape) -> str:
    """`8x2048`, `scalar` for rank 0; `?` for an unknown shape."""
    return "?" if shape is None else ("x".join(str(d) for d in shape) or "scalar")


def _print_summary(console, report: Report) -> None:
    lines = report.summary_lines()
    labels = max((len(label) for label, _ in lines), default=0)
    # The values quote variable paths: each wraps at a `/`, not inside a name.
    room = console.width - labels - 2
    if console.plain:  # rich's grid below, two blanks between the columns
        out = []
        for label, value in lines:
            first, *more = broken_at_slashes(visible(value), max(room, 1)).split("\n")
            out.append(f"{label:<{labels}}  {first}".rstrip(" \t") + "\n")
            out.extend(f"{'':<{labels}}  {line}".rstrip(" \t") + "\n" for line in more)
        console.write("".join(out))
        return
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in lines:
        # Text, never markup: a summary quotes variable paths, and `emb[/]` is a path.
        grid.add_row(Text(label), Text(broken_at_slashes(visible(value), max(room, 1))))
    console.print(grid)


def _print_trace(console, info: dict | None) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    if info is None:
        return
    head = Text()
    head.append(visible(info["path"]), style="bold")
    head.append(f"  {_bracketed_shape(info['shape'])} {info['dtype']}")
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
        table.add_row(Text(visible(f"{os.path.basename(r['file'] or '')}:{r['line']}")),
                      Text(visible('"' + r["pattern"].replace('"', '\\"') + '"'), style=style),
                      Text(verdict + mark, style=style))
    d = info["default"]
    if d is not None:
        is_winner = info["reason"] == "default"
        table.add_row(Text(visible(f"{os.path.basename(d['file'] or '')}:{d['line']}")),
                      Text("default", style="bold green" if is_winner else "dim"),
                      Text(("applies" + "  <- wins") if is_winner else "not needed",
                           style="bold green" if is_winner else "dim"))
    if info["rules"] or d is not None:
        console.print(table)
    else:
        console.print(Text("no rules", style="dim"))
    console.print(Text.assemble(("decision: ", "bold"), visible(info["why"])))
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
                line.append(visible(f": {alt['why']}"))
            console.print(line)
        if info["taken"] == -1:
            console.print(Text("  none fits: the variable stays replicated, an error "
                               "(below)", style="red"))
    console.print()
    result = Text.assemble(("result: ", "bold"), (_layout_cell(info), "bold"))
    result.append(f"   shard {_bracketed_shape(info['shard_shape'])}"
                  f"   {human_bytes(info['bytes_per_device'])} per device")
    console.print(result)
    console.print()

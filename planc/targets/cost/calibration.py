"""Calibration files: how far below its peaks a chip really runs each class of work.

A calibration is JSON, schema `planc.calibration/1`:

    {
      "schema": "planc.calibration/1",
      "chip": "v5e",                      # a row of planc.targets.cost.chips
      "efficiency": {"matmul": 0.55, "hbm": 0.8, "ici": 0.7, "dcn": 0.5},  # each in [0.01, 1]
      "overlap": 0.5,                     # the share of collective time hidden under compute
      "op_s": 4.5e-06,                    # seconds to start one op on the core (optional, 0)
      "measured": {"device_kind": "TPU v5 lite", "jax": "0.10.2", "date": "2026-12-05",
                   "steps": ["..."]}      # where it was fitted: any JSON, kept as written
    }

`planc cost --calibrate` writes one (`planc.targets.cost.calibrate`). planc ships the
files fitted on real chips in `calibrations/CHIP.json` beside this module, and prices
with the chip's own when no file is named (`calibration_for`). Without one, or with
`none`, every efficiency is 1 and nothing overlaps: the estimate is then the peak rates'
time with collectives after compute, and the report says it is uncalibrated.

A file is read as untrusted input, and refused with P812 at the line and column of its
fault: not a regular file (a FIFO is never waited on), over `MAX_BYTES`, not UTF-8, not
JSON, a key written twice, a number that is not finite or an integer of more than
`MAX_DIGITS` digits, a key the schema does not have, a value not of its key's kind
(`DOCUMENT`: an efficiency is finite, at least `FLOOR` and at most 1), or a file for
another chip. `planc cost` reads the file before it compiles the step
(`read_before_compile`).
"""

from __future__ import annotations

import errno
import math
import os
import stat

from planc.diagnostics import PlanError, Span, error
from planc.diagnostics.did_you_mean import closest
from planc.sources.jsonpos import JsonSyntax, Node, parse

__all__ = ["Calibration", "UNCALIBRATED", "read_calibration", "calibration_for", "SCHEMA",
           "SHIPPED", "DOCUMENT", "EFFICIENCY", "Key", "read_before_compile"]

SCHEMA = "planc.calibration/1"
TERMS = ("matmul", "hbm", "ici", "dcn")
MAX_BYTES = 1 << 20  # a calibration is a few kilobytes
FLOOR = 0.01  # the smallest efficiency: a chip at 1% of its peak is a mismeasured one
MAX_DIGITS = 18  # an integer longer than this is no step count, size or date


class Key:
    """One key of a calibration's table: its `kind` (a name in `KINDS`, or the table of a
    nested object) and whether every file must have it."""

    __slots__ = ("kind", "required")

    def __init__(self, kind, required: bool = False):
        self.kind = kind
        self.required = required


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# Each kind of value: (is the value one, what one is).
KINDS = {
    "efficiency": (lambda v: _number(v) and FLOOR <= v <= 1,
                   f"a fraction of the chip's peak, at least {FLOOR} and at most 1"),
    "fraction": (lambda v: _number(v) and 0 <= v <= 1, "a fraction from 0 to 1"),
    "seconds": (lambda v: _number(v) and v >= 0, "a time in seconds, 0 or more"),
    # No chip takes a millisecond to start an op: a larger `op_s` is a unit mistake.
    "op_seconds": (lambda v: _number(v) and 0 <= v <= 1e-3,
                   "the seconds to start one op, from 0 to 0.001"),
    "text": (lambda v: isinstance(v, str), "a string"),
    "any": (lambda v: True, "any JSON value"),
}
# What a calibration holds. A new class of work is a new line here.
EFFICIENCY = {term: Key("efficiency") for term in TERMS}
DOCUMENT = {
    "schema": Key("text", required=True),
    "chip": Key("text", required=True),
    "efficiency": Key(EFFICIENCY, required=True),
    "overlap": Key("fraction"),
    "op_s": Key("op_seconds"),
    "measured": Key("any"),
}
# The calibrations planc ships, one per chip (`v5e.json`), each fitted on that chip.
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calibrations")


class Calibration:
    """Per-class `efficiency` (a fraction of the chip's peak), the `overlap` of
    collectives with compute, `op_s` (seconds to start an op on the core), the `chip` it
    is for and the `file` it was read from."""

    __slots__ = ("chip", "efficiency", "overlap", "file", "measured", "op_s")

    def __init__(self, chip, efficiency, overlap, file=None, measured=None, op_s=0.0):
        self.chip = chip
        self.efficiency = efficiency
        self.overlap = overlap
        self.file = file
        self.measured = measured
        self.op_s = op_s

    def to_dict(self) -> dict | None:
        if self.file is None:
            return None
        return {"file": self.file, "chip": self.chip, "efficiency": dict(self.efficiency),
                "overlap": self.overlap, "op_s": self.op_s}


UNCALIBRATED = Calibration(None, dict.fromkeys(TERMS, 1.0), 0.0)


class CalibrationError(Exception):
    """A calibration file refused: `diagnostic` (P812), and `sources` (its text, for the
    diagnostic's snippet)."""

    def __init__(self, diagnostic, sources=None):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic
        self.sources = sources or {}


def calibration_for(path, chip_name: str) -> Calibration:
    """What prices a step on chip `chip_name`: the file `path` (or a `Calibration` already
    read from one, checked for the chip); none for `none`; and without a path, the file
    planc ships for the chip, if any (shown as `planc:calibrations/CHIP.json`).
    `CalibrationError` (P812) as `read_calibration`."""
    if isinstance(path, Calibration):
        if path.file is not None and path.chip != chip_name:
            raise CalibrationError(_bad(path.file, f"is for chip `{path.chip}`, and the "
                                                   f"topology's chip is `{chip_name}`"))
        return path
    if path == "none":
        return UNCALIBRATED
    if path is not None:
        return read_calibration(path, chip_name)
    shipped = os.path.join(SHIPPED, f"{chip_name}.json")
    if not os.path.isfile(shipped):
        return UNCALIBRATED
    return read_calibration(shipped, chip_name, shown=f"planc:calibrations/{chip_name}.json")


def read_before_compile(path, ir, topology: str, chip: str | None):
    """`--calibration path` read and checked before the step is compiled for `topology`
    (a bad file costs no compile): the `Calibration` for `cost_of`, or `path` itself
    where it names no file (None, `none`). Its chip is checked where the topology loads
    and planc has its chip; else `cost_of` checks it. `PlanError` (P812)."""
    if path is None or path == "none":
        return path
    from planc.targets.aot.feasibility import slice_count
    from planc.targets.aot.topology import TopologyError, load_topology
    from planc.targets.cost.chips import chip_to_price

    chip_name = None
    try:
        loaded = load_topology(topology, slice_count(ir))
        chip_name = chip_to_price(loaded.platform, loaded.device_kind, chip).name
    except (TopologyError, LookupError):
        pass  # the compile, or the pricing after it, says why (P801, P802, P815)
    try:
        return read_calibration(path, chip_name)
    except CalibrationError as exc:
        raise PlanError((exc.diagnostic,), {**ir.source_dict, **exc.sources}) from None


def read_calibration(path: str, chip_name: str | None, shown: str | None = None) -> Calibration:
    """The calibration in file `path`, for chip `chip_name` (None: any chip);
    `CalibrationError` (P812) for each fault the module docstring lists. `shown` is how
    reports name the file (default: `path`)."""
    name = shown or path
    text = _read_text(path, name)
    sources = {name: text}
    try:
        root = parse(text, name)
    except JsonSyntax as exc:
        raise CalibrationError(_bad(name, f"is not JSON: {exc.message}", exc.span), sources) \
            from None
    fault = _number_or_duplicate(root)
    if fault is None:
        schema = root.get("schema") if isinstance(root.value, dict) else None
        if schema is None or schema.value != SCHEMA:
            fault = (f"is not a `{SCHEMA}` document (its `schema`)",
                     schema.span if schema is not None else root.span)
        else:
            fault = _against(root, DOCUMENT, ())
    if fault is None and chip_name is not None and root.value["chip"] != chip_name:
        fault = (f"is for chip `{root.value['chip']}`, and the topology's chip is "
                 f"`{chip_name}`", root.get("chip").span)
    if fault is not None:
        raise CalibrationError(_bad(name, *fault), sources)
    doc = root.value
    return Calibration(doc["chip"], {**UNCALIBRATED.efficiency, **doc["efficiency"]},
                       float(doc.get("overlap", 0.0)), name, doc.get("measured"),
                       float(doc.get("op_s", 0.0)))


def _read_text(path: str, name: str) -> str:
    """The file's text: a regular file, at most `MAX_BYTES`, UTF-8."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file" + (
                " (a directory)" if stat.S_ISDIR(info.st_mode) else
                " (a FIFO)" if stat.S_ISFIFO(info.st_mode) else
                " (a device)" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else ""))
        if info.st_size > MAX_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_BYTES // 2**20} MiB")
        # Opened without blocking, and checked again: the path may have changed since.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_BYTES // 2**20} MiB")
    except OSError as exc:
        from planc.fileio import os_error_text

        raise CalibrationError(_bad(name, f"cannot be read: {os_error_text(exc)}")) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[:exc.start].decode("utf-8", "replace")
        line = before.count("\n") + 1
        column = len(before) - before.rfind("\n")
        raise CalibrationError(_bad(name, f"is not UTF-8 (byte 0x{data[exc.start]:02x})",
                                    Span(name, line, column, line, column + 1))) from None


def _number_or_duplicate(root: Node):
    """(why, span) of the first key written twice in an object, number that is not finite
    (JSON has no NaN or Infinity) or integer of more than `MAX_DIGITS` digits; else None."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.pairs:
            seen = set()
            for key, _ in node.pairs:
                if key.value in seen:
                    return f"names `{_shown(key.value)}` twice in one object", key.span
                seen.add(key.value)
        value = node.value
        if isinstance(value, float) and not math.isfinite(value):
            shown = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
            return (f"holds {shown}, not a finite number (JSON has no NaN or Infinity)",
                    node.span)
        if isinstance(value, int) and not isinstance(value, bool) and \
                len(str(abs(value))) > MAX_DIGITS:
            return (f"holds an integer of {len(str(abs(value))):,} digits (at most "
                    f"{MAX_DIGITS})", node.span)
        stack.extend(reversed(node.items))
        stack.extend(v for _, v in reversed(node.pairs))
    return None


def _against(node: Node, table: dict, where: tuple):
    """(why, span) of the first fault of object `node` against `table`; else None."""
    if not isinstance(node.value, dict):
        return f"has {_named(where)} = {_shown(_text(node))}, not an object", node.span
    for key, value in node.pairs:
        entry = table.get(key.value)
        if entry is None:
            near = closest(key.value, list(table))
            hint = f" (did you mean `{near}`?)" if near else ""
            return (f"has a key `{_shown(key.value)}`{_inside(where)} that a calibration "
                    f"does not have{hint}; it has " + ", ".join(f"`{k}`" for k in table),
                    key.span)
        if isinstance(entry.kind, dict):
            fault = _against(value, entry.kind, where + (key.value,))
            if fault is not None:
                return fault
            continue
        ok, what = KINDS[entry.kind]
        if not ok(value.value):
            return (f"has {_named(where + (key.value,))} = {_shown(_text(value))}, not "
                    f"{what}", value.span)
    missing = [k for k, e in table.items() if e.required and k not in node.value]
    if missing:
        return f"has no `{missing[0]}`{_inside(where)}", node.span
    return None


def _named(where: tuple) -> str:
    return "`" + ".".join(where) + "`"


def _inside(where: tuple) -> str:
    return f" in {_named(where)}" if where else ""


def _text(node: Node) -> str:
    import json

    return json.dumps(node.value, allow_nan=True) if not isinstance(node.value, (dict, list)) \
        else ("an object" if isinstance(node.value, dict) else "a list")


def _shown(text: str, limit: int = 40) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _bad(name: str, why: str, span: Span | None = None):
    return error("P812", f"calibration file `{name}` {why}", span,
                 file=None if span is not None else name,
                 help=f"a calibration is a `{SCHEMA}` JSON document fitted on the chip "
                      "(docs/cost.md); without --calibration planc prices at the chip's "
                      "peaks, uncalibrated")

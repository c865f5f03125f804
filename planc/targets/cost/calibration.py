"""Calibration files: how far below its peaks a chip really runs each class of work.

A calibration is JSON, schema `planc.calibration/1`:

    {
      "schema": "planc.calibration/1",
      "chip": "v5e",                      # a row of planc.targets.cost.chips
      "efficiency": {"matmul": 0.55, "hbm": 0.8, "ici": 0.7, "dcn": 0.5},  # each in (0, 1]
      "overlap": 0.5,                     # the share of collective time hidden under compute
      "op_s": 4.5e-06,                    # seconds to start one op on the core (optional, 0)
      "measured": {"device_kind": "TPU v5 lite", "jax": "0.10.2", "date": "2026-12-05",
                   "steps": ["..."]}      # where it was fitted: any JSON, kept as written
    }

`planc cost --calibrate` writes one (`planc.targets.cost.calibrate`). planc ships the
files fitted on real chips in `calibrations/CHIP.json` beside this module, and prices
with the chip's own when no file is named (`calibration_for`). Without one, or with
`none`, every efficiency is 1 and nothing overlaps: the estimate is then the peak rates'
time with collectives after compute, and the report says it is uncalibrated. A file
that is not this schema, or is for another chip, is P812.
"""

from __future__ import annotations

import json
import os

from planc.diagnostics import error

__all__ = ["Calibration", "UNCALIBRATED", "read_calibration", "calibration_for", "SCHEMA",
           "SHIPPED"]

SCHEMA = "planc.calibration/1"
TERMS = ("matmul", "hbm", "ici", "dcn")
# The calibrations planc ships, one per chip (`v5e.json`), each fitted on that chip.
# No chip takes a millisecond to start an op: a larger `op_s` is a unit mistake.
MAX_OP_S = 1e-3
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
    def __init__(self, diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def calibration_for(path: str | None, chip_name: str) -> Calibration:
    """What prices a step on chip `chip_name`: the file `path`; none for `none`; and
    without a path, the file planc ships for the chip, if any (shown as
    `planc:calibrations/CHIP.json`). `CalibrationError` (P812) as `read_calibration`."""
    if path == "none":
        return UNCALIBRATED
    if path is not None:
        return read_calibration(path, chip_name)
    shipped = os.path.join(SHIPPED, f"{chip_name}.json")
    if not os.path.isfile(shipped):
        return UNCALIBRATED
    return read_calibration(shipped, chip_name, shown=f"planc:calibrations/{chip_name}.json")


def read_calibration(path: str, chip_name: str | None, shown: str | None = None) -> Calibration:
    """The calibration in file `path`, for chip `chip_name`; `CalibrationError` (P812)
    when it cannot be read, is not `planc.calibration/1`, or is for another chip. `shown`
    is how reports name the file (default: `path`)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(_bad(path, f"cannot be read: {exc}")) from None
    except json.JSONDecodeError as exc:
        raise CalibrationError(_bad(path, f"is not JSON: {exc.msg} at line {exc.lineno}, "
                                          f"column {exc.colno}")) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise CalibrationError(_bad(path, f"is not a `{SCHEMA}` document (its `schema`)"))
    efficiency = doc.get("efficiency")
    if not isinstance(efficiency, dict) or set(efficiency) - set(TERMS):
        raise CalibrationError(_bad(path, "`efficiency` maps " + ", ".join(TERMS) +
                                          " to fractions"))
    for term, value in efficiency.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise CalibrationError(_bad(path, f"efficiency `{term}` is {value!r}, not a "
                                              "fraction in (0, 1]"))
    overlap = doc.get("overlap", 0.0)
    if isinstance(overlap, bool) or not isinstance(overlap, (int, float)) or not 0 <= overlap <= 1:
        raise CalibrationError(_bad(path, f"`overlap` is {overlap!r}, not a fraction in [0, 1]"))
    op_s = doc.get("op_s", 0.0)
    if (isinstance(op_s, bool) or not isinstance(op_s, (int, float))
            or not 0 <= op_s <= MAX_OP_S):
        raise CalibrationError(_bad(path, f"`op_s` is {op_s!r}, not seconds in "
                                          f"[0, {MAX_OP_S:g}]"))
    chip = doc.get("chip")
    if chip_name is not None and chip != chip_name:
        raise CalibrationError(_bad(path, f"is for chip `{chip}`, and the topology's chip is "
                                          f"`{chip_name}`"))
    return Calibration(chip, {**UNCALIBRATED.efficiency, **efficiency}, float(overlap),
                       shown or path, doc.get("measured"), float(op_s))


def _bad(path: str, why: str):
    return error("P812", f"calibration file `{path}` {why}", None, file=path,
                 help=f"a calibration is a `{SCHEMA}` JSON document fitted on the chip "
                      "(docs/cost.md); without --calibration planc prices at the chip's "
                      "peaks, uncalibrated")

"""Benchmark 17's fit: the per-op cost model fitted on step times measured on one TPU v5e
chip, and checked on the steps it was not fitted on.

    python bench/chip_fit.py bench/chip_data/2026-12-07 --json chip_cost.json

`DIR` holds what the chip measured (`chip_cost.json` of benchmark 17, `chip_search.json`
of benchmark 19: `python bench/chip_kit.py run` wrote them there) and, in `DIR/hlo/`, the
program XLA compiled for each step (`bench/chip_programs.py`). The fit runs anywhere, in
seconds, from those files alone:

1. each step's ops are counted from its HLO (`planc.targets.cost.counting`) and priced
   at the chip's peaks (`model.profile`);
2. the calibration is fitted on `chip_steps.FIT`, named before the fit;
3. every other step, and the plan benchmark 19 searched, is predicted with it. Goals:
   each within +-15% of its measured median, half of them within +-7%, and every
   measured time between the step's lower and upper bounds.

The JSON is benchmark 17's (`chip_kit.py bring` writes its section of docs/benchmarks.md
and ships its `calibration` when every check passes).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import Results, status  # noqa: E402

# Benchmark 19's winner, as `chip_programs.py` names it, where the chip's JSON predates
# `program` (2026-12-07's first run).
SEARCHED = "search_remat"


def measured_times(source: Path) -> dict[str, float]:
    """Each step's measured median (seconds) in the chip's JSON under `source`."""
    out = {}
    cost = json.loads((source / "chip_cost.json").read_text())
    for row in cost["rows"]:
        if "measured_s" in row["raw"]:
            out[row["figure"].split("`")[1]] = row["raw"]["measured_s"]
    search = source / "chip_search.json"
    if search.exists():
        for row in json.loads(search.read_text())["rows"]:
            if "measured_s" in row["raw"] and row["figure"].startswith("the searched plan"):
                out[row["raw"].get("program", SEARCHED)] = row["raw"]["measured_s"]
    return out


def main(argv):
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source")
    p.add_argument("--json")
    a = p.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import chip_steps
    from planc.targets.cost.calibration import SCHEMA, TERMS
    from planc.targets.cost.chips import chip_named
    from planc.targets.cost.counting import count
    from planc.targets.cost.fitting import Sample, estimate, fit
    from planc.targets.cost.model import bounds, op_terms, profile
    from planc.targets.cost.report import seconds_text

    started = time.process_time()
    source = Path(a.source)
    cost_doc = json.loads((source / "chip_cost.json").read_text())
    measured = measured_times(source)
    chip = chip_named("v5e")
    samples, exact, flops, unestimated, bounded = {}, {}, {}, {}, {}
    for name in sorted(measured):
        hlo = source / "hlo" / f"{name}.hlo.gz"
        if not hlo.exists():
            continue
        counts = count(gzip.decompress(hlo.read_bytes()).decode())
        samples[name] = Sample(name, profile(counts.ops, chip), (), measured[name])
        exact[name] = counts.exact
        flops[name] = counts.flops["matmul"]
        unestimated[name] = counts.unestimated
        bounded[name] = counts.bounded
    results = Results("chip_cost", "planc cost on one TPU v5e chip", "full")
    results.note("; ".join(cost_doc.get("notes", [])[:1])
                 + f" ({cost_doc.get('date', '')}); each step's program from {source}/hlo/ "
                   "(as the chip compiled it, or for compile-only v5e:1x1 at the same JAX "
                   "by bench/chip_programs.py where the chip kept none)")
    fitted_on = [samples[n] for n in chip_steps.FIT]
    result = fit(fitted_on)
    cal = result.calibration
    results.note(f"fitted on {', '.join(chip_steps.FIT)}: " + ", ".join(
        f"{k} {cal.efficiency[k]:.3f}" for k in result.fitted if k in TERMS)
        + (f", op_s {cal.op_s * 1e6:.2f} us" if "op_s" in result.fitted else "")
        + f"; unfitted (at the peaks): {', '.join(result.unfitted)}")
    errors, within_bounds = [], True
    order = list(chip_steps.FIT) + [n for n in samples if n not in chip_steps.FIT]
    for name in order:
        s = samples[name]
        predicted = estimate(s, cal)
        lower, upper, _ = bounds(op_terms(s.profile, cal), cal)
        if not bounded[name]:
            upper = None  # as the report says it (P824, P814): no bound to hold
        error = predicted / s.measured_s - 1
        held = lower <= s.measured_s and (upper is None or s.measured_s <= upper)
        within_bounds &= held
        fitted = name in chip_steps.FIT
        if not fitted:
            errors.append(abs(error))
        results.row(f"`{name}`: predicted vs measured step time"
                    + (" (fitted on)" if fitted else ""),
                    f"{seconds_text(predicted)} vs {seconds_text(s.measured_s)} ({error:+.1%}); "
                    f"bounds {seconds_text(lower)} to "
                    + (seconds_text(upper) if upper is not None else
                       f"unknown (P824: {len(unestimated[name])} op(s) XLA:TPU could not "
                       "estimate)"),
                    "" if fitted else "within 15%, inside the bounds",
                    "" if fitted else status(abs(error) <= 0.15 and held),
                    predicted_s=predicted, measured_s=s.measured_s, lower_s=lower,
                    upper_s=upper, exact=exact[name], validate=not fitted)
    for name in order:
        if name in chip_steps.NAMES:
            hlo = flops[name]
            expected = chip_steps.analytic_flops(name)
            results.row(f"`{name}`: matmul FLOPs, HLO vs shapes",
                        f"{hlo / 1e12:.4f} vs {expected / 1e12:.4f} TFLOP "
                        f"({hlo / expected - 1:+.3%})", "within 2%",
                        status(abs(hlo / expected - 1) <= 0.02), hlo=hlo, expected=expected)
    within = sum(e <= 0.15 for e in errors)
    results.row("checked steps within +-15%", f"{within} of {len(errors)}", "all",
                status(within == len(errors)))
    close = sum(e <= 0.07 for e in errors)
    results.row("checked steps within +-7%", f"{close} of {len(errors)}", "at least half",
                status(2 * close >= len(errors)))
    results.row("measured times inside [lower, upper]", "all" if within_bounds else "not all",
                "all", status(within_bounds))
    results.data["calibration"] = {
        "schema": SCHEMA, "chip": "v5e",
        "efficiency": {k: float(f"{cal.efficiency[k]:.4g}") for k in TERMS},
        "overlap": 0.0, "op_s": float(f"{cal.op_s:.4g}"),
        "measured": {"device_kind": "TPU v5 lite", "devices": 1, "jax": "0.10.2",
                     "date": cost_doc.get("date", ""), "fitted_on": list(chip_steps.FIT),
                     "fitted": list(result.fitted), "unfitted": list(result.unfitted),
                     "by": "bench/chip_fit.py"}}
    results.data["seconds"] = time.process_time() - started
    results.data["date"] = cost_doc.get("date", "")
    results.ratio("worst_validation_error", max(errors),
                  "(the largest |predicted / measured - 1| over the steps not fitted on; "
                  "goal <= 0.15)", a.json)


if __name__ == "__main__":
    main(sys.argv[1:])

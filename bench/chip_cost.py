"""Benchmark 17: `planc cost` checked on one TPU v5e chip (`bench/chip_steps.py`: a
scanned MLP and a decoder with causal attention, each with and without `jax.checkpoint`,
at two sizes).

For every step, compiled for one v5e chip:

1. FLOPs: the matmul FLOPs planc reads from the optimized HLO, loops' trip counts
   multiplied in, against the count from the shapes (`chip_steps.analytic_flops`: 6 N T
   for the weights, attention's T x T, remat's second forward). Goal: within 2%.
2. The peak: the compile's, under the chip's 15.75 GiB, so the step runs there.

With the chip attached (`PLANC_CHIP=1`, on a TPU VM), also:

3. each step runs there (`planc.targets.cost.calibrate.measure_steps`, as
   `planc cost --calibrate` runs it: the median of 10 steps after 2 untimed);
4. the calibration is fitted on two steps (`chip_steps.FIT`: the MLP memory-bound at its
   small batch, compute-bound at its large one), and every other step's time predicted
   with it. Goal: within +-15% of the measured time. The fitted file is kept in the
   JSON (`calibration`), to ship as `planc/targets/cost/calibrations/v5e.json`.

Without the chip, steps 1-2 run on compile-only `v5e:1x1` through libtpu and the
estimates are the peak-rate model's, marked so.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
if os.environ.get("PLANC_CHIP") == "1":
    # On the chip: JAX finds its platform (`common` would otherwise choose the CPU).
    os.environ.setdefault("JAX_PLATFORMS", "")

from common import Results, args, status  # noqa: E402


def main():
    a = args(__doc__.splitlines()[0])
    on_chip = os.environ.get("PLANC_CHIP") == "1"
    if not on_chip:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    import jax

    import chip_steps
    import planc
    from planc.targets.cost.chips import chip_named
    from planc.targets.cost.report import seconds_text

    chip_steps.configure(a.size)
    results = Results("chip_cost", "planc cost on one TPU v5e chip", a.size)
    plan = planc.loads(chip_steps.PLAN, file="chip.kd")
    if on_chip:
        steps = _measured(plan, results)
        reports = [(s.spec.split(":")[1], s.cost) for s in steps]
    else:
        results.note(f"JAX {jax.__version__}, compile-only v5e:1x1 through libtpu, "
                     f"{time.strftime('%Y-%m-%d')}; no chip attached: nothing measured, "
                     "the estimates are the peak rates' (uncalibrated)")
        reports = ((name, _compiled(plan, name)) for name in chip_steps.NAMES)
    usable = chip_named("v5e").hbm_usable
    worst = 0.0
    for name, report in reports:
        if isinstance(report, planc.PlanError):
            worst = float("inf")
            d = report.diagnostics[0]
            results.row(f"`{name}`: compiled", f"{d.code}: {d.message}", "compiles",
                        status(False))
            continue
        hlo, expected = report.counts.flops["matmul"], chip_steps.analytic_flops(name)
        off = hlo / expected - 1
        worst = max(worst, abs(off))
        results.row(f"`{name}`: matmul FLOPs, HLO vs shapes",
                    f"{hlo / 1e12:.4f} vs {expected / 1e12:.4f} TFLOP ({off:+.3%})",
                    "within 2%", status(abs(off) <= 0.02), hlo=hlo, expected=expected)
        peak = report.aot.peak
        results.row(f"`{name}`: compiled peak, and the estimate at the peak rates",
                    f"{peak / 2**30:.2f} GiB; {seconds_text(report.estimate_s)} a step, "
                    f"bound by {report.bottleneck[0][0].name}",
                    f"fits {usable / 2**30:.2f} GiB", status(peak <= usable),
                    peak=peak, estimate_s=report.estimate_s, lower_s=report.lower_s)
    results.ratio("worst_flops_error", worst,
                  "(the largest |HLO / shapes - 1| of the matmul FLOPs over the steps; "
                  "goal <= 0.02)", a.json)


def _compiled(plan, name):
    """The step's uncalibrated cost on compile-only `v5e:1x1`, or the `PlanError` that
    stopped it (a step that does not fit is a missed goal, not a crash)."""
    import chip_steps
    import planc

    try:
        return plan.cost(*chip_steps.build(name), topology="v5e:1x1", calibration="none")
    except planc.PlanError as exc:
        return exc


def _measured(plan, results):
    """Steps 3-4 of the module docstring, on the attached chip."""
    import jax

    import chip_steps
    from planc.targets.aot.topology import attached_topology
    from planc.targets.cost.calibrate import fitted_run, measure_steps
    from planc.targets.cost.chips import chip_for
    from planc.targets.cost.fitting import estimate
    from planc.targets.cost.report import seconds_text

    topology = attached_topology()
    row = chip_for(topology.device_kind)
    results.note(f"{topology.device_kind} x {len(topology.devices)}, JAX {jax.__version__}, "
                 f"{time.strftime('%Y-%m-%d')}; measured: the median of 10 steps after 2")
    specs = [f"chip_steps:{n}" for n in chip_steps.NAMES]
    steps = measure_steps(plan.ir, specs, topology, row.name, repeats=10, warmup=2,
                          plan_of=lambda ir: plan)
    fitted_on = [s for s in steps if s.spec.split(":")[1] in chip_steps.FIT]
    run = fitted_run(plan.ir, fitted_on, topology, row, 10)
    result = run.fit
    results.data["calibration"] = run.document()
    worst = 0.0
    for s in steps:
        name = s.spec.split(":")[1]
        predicted = estimate(s.sample, result.calibration)
        error = predicted / s.timing.seconds - 1
        fitted = name in chip_steps.FIT
        if not fitted:
            worst = max(worst, abs(error))
        results.row(f"`{name}`: predicted vs measured step time"
                    + (" (fitted on)" if fitted else ""),
                    f"{seconds_text(predicted)} vs {seconds_text(s.timing.seconds)} "
                    f"({error:+.1%})", "" if fitted else "within 15%",
                    "" if fitted else status(abs(error) <= 0.15), predicted_s=predicted,
                    measured_s=s.timing.seconds, samples=list(s.timing.samples))
    results.note(f"fitted {', '.join(result.fitted)}: " + ", ".join(
        f"{k} {result.efficiency[k]:.3f}" for k in result.fitted if k in result.efficiency)
        + f"; worst prediction error on the other steps {worst:.1%}")
    return steps


if __name__ == "__main__":
    main()

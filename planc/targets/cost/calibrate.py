"""`planc cost --calibrate`: fit a chip's calibration from steps run on the chip itself.

For each step (`MODULE:ATTR`, as `planc cost --step` takes it), on the devices attached
to this process:

1. the step is compiled under the plan, as `planc aot` compiles it, and priced by the
   cost model at the chip's peaks (`cost_of`, uncalibrated);
2. the same executable runs on the chip with real values (`measure.time_step`): the
   median of `repeats` steps after `warmup`;
3. a step that ran faster than its lower bound is refused (P820): the chip table or the
   counts would be wrong, and no efficiency can explain it.

Then `fitting.fit` finds the efficiencies, the cost of starting an op and the overlap that bring the estimates closest
to the measurements, and `CalibrationRun.document()` is the `planc.calibration/1` file.

Only the chip can be measured: on CPU devices, or a chip other than `--chip`, the run is
refused (P819) rather than writing figures of one machine under another's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from planc.diagnostics import PlanError, error
from planc.targets.cost.calibration import SCHEMA, TERMS
from planc.targets.cost.fitting import Sample, fit, sample_of

__all__ = ["calibrate", "measure_steps", "fitted_run", "CalibrationRun", "MeasuredStep"]


@dataclass(slots=True, eq=False)
class MeasuredStep:
    """One step of a calibration: its `spec`, its uncalibrated `CostReport` (`cost`) and
    its `Timing` on the chip (`timing`)."""

    spec: object
    cost: object
    timing: object

    @property
    def sample(self) -> Sample:
        return sample_of(self.spec, self.cost, self.timing.seconds)


@dataclass(slots=True, eq=False)
class CalibrationRun:
    """The measured `steps`, the `fit` and where it was measured (`chip` row,
    `device_kind`, `devices`, `jax` version, `date`, `plan`, `repeats`)."""

    steps: tuple
    fit: object
    chip: object
    device_kind: str
    devices: int
    jax: str
    date: str
    plan: str
    repeats: int

    def __post_init__(self):
        self.steps = tuple(self.steps)

    def document(self) -> dict:
        """The `planc.calibration/1` file (see `planc.targets.cost.calibration`)."""
        f = self.fit
        return {
            "schema": SCHEMA,
            "chip": self.chip.name,
            "efficiency": {k: _figure(f.efficiency[k]) for k in TERMS},
            "overlap": _figure(f.overlap),
            "op_s": _figure(f.op_s),
            "measured": {
                "device_kind": self.device_kind, "devices": self.devices, "jax": self.jax,
                "date": self.date, "plan": self.plan, "repeats": self.repeats,
                "fitted": list(f.fitted), "unfitted": list(f.unfitted),
                "steps": [{"step": s.spec, "measured_s": _figure(s.timing.seconds),
                           "estimate_s": _figure(e),
                           "lower_s": _figure(s.cost.lower_s),
                           "uncalibrated_s": _figure(s.cost.estimate_s)}
                          for s, e in zip(self.steps, f.estimates)],
            },
        }


def _figure(x: float) -> float:
    return float(f"{x:.6g}")


def calibrate(ir, specs, *, repeats: int = 10, warmup: int = 2, chip: str | None = None,
              donate: bool = True, plan_of=None) -> CalibrationRun:
    """Measure each step of `specs` on the attached chip and fit a calibration (see the
    module docstring). `PlanError`: P819 when the devices are not the chip, P820 when a
    step cannot be measured, and the compile's own (P801-P818)."""
    from planc.targets.aot.topology import attached_topology
    from planc.targets.cost.chips import chip_for, chip_named

    topology = attached_topology()
    row = chip_for(topology.device_kind) if topology.platform != "cpu" else None
    if row is None or (chip is not None and chip_named(chip) is not row):
        raise PlanError((_not_the_chip(ir, topology, chip, row),), ir.source_dict)
    steps = measure_steps(ir, specs, topology, row.name, repeats=repeats, warmup=warmup,
                          donate=donate, plan_of=plan_of)
    return fitted_run(ir, steps, topology, row, repeats)


def fitted_run(ir, steps, topology, row, repeats: int) -> CalibrationRun:
    """The calibration fitted on the measured `steps` (`MeasuredStep`s), with where and
    when they were measured: `topology`'s devices, chip `row`, this JAX, today."""
    import datetime

    import jax

    return CalibrationRun(steps, fit([s.sample for s in steps]), row, topology.device_kind,
                          len(topology.devices), jax.__version__,
                          datetime.date.today().isoformat(), ir.file, repeats)


def measure_steps(ir, specs, topology, chip: str, *, repeats: int = 10, warmup: int = 2,
                  donate: bool = True, plan_of=None) -> list[MeasuredStep]:
    """Each step of `specs` compiled for `topology` (attached devices), priced as `chip`
    at its peaks and timed there (steps 1-3 of the module docstring)."""
    from planc.targets.aot.step_builder import build_step, compile_named_step, refuse_keras
    from planc.targets.cost.estimate import cost_of
    from planc.targets.cost.measure import time_step
    from planc.targets.cost.report import seconds_text

    out = []
    for spec in specs:
        report, built = compile_named_step(
            ir, spec, topology, donate=donate, plan_of=plan_of,
            inspect=lambda built: refuse_keras(ir, built, spec, "`planc cost --calibrate`"))
        cost = cost_of(ir, report, calibration="none", chip=chip)  # at the peaks
        if built.abstractly:  # the values to run it on, built for real this time
            built = build_step(ir, spec, plainly=True, plan_of=plan_of)
        try:
            timing = time_step(report.program.executable, built.trees, repeats=repeats,
                               warmup=warmup)
        except Exception as exc:  # the chip's own refusal: out of memory, a bad value
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise PlanError((_unmeasured(ir, f"--step {spec} failed on {topology.device_kind}: "
                                             f"{type(exc).__name__}: {first}",
                                         "run the step in plain JAX on this machine first"),),
                            ir.source_dict) from None
        if timing.seconds < cost.lower_s:
            raise PlanError((_unmeasured(
                ir, f"--step {spec} ran in {seconds_text(timing.seconds)}, faster than its "
                    f"lower bound {seconds_text(cost.lower_s)} at {chip}'s peak rates",
                "no efficiency explains a step faster than the chip's peaks: the chip's row "
                "(planc/targets/cost/chips.py) or the counts of the compiled HLO are wrong; "
                "please report it with the step"),), ir.source_dict)
        out.append(MeasuredStep(spec, cost, timing))
    return out


def _not_the_chip(ir, topology, chip, row):
    here = (f"{len(topology.devices)} CPU device(s)" if topology.platform == "cpu"
            else f"{topology.device_kind}")
    if row is None:
        why = (f"the devices attached are {here}, which planc has no chip figures for"
               if topology.platform != "cpu" else f"the devices attached are {here}")
    else:
        why = f"the devices attached are {here} (`{row.name}`), not `{chip}`"
    return error("P819", f"`planc cost --calibrate` measures the chip it calibrates: {why}",
                 None, file=ir.file,
                 help="run it on a machine with the chip attached (a TPU VM, with "
                      "JAX_PLATFORMS unset or `tpu`); `--chip` may only name that chip")


def _unmeasured(ir, message, help):
    return error("P820", message, None, file=ir.file, help=help)

"""Benchmark 17: `planc cost` checked on one TPU v5e chip (`bench/chip_steps.py`: 18
steps, MLPs and causal decoders at three widths, memory-bound to compute-bound, with and
without `jax.checkpoint`, Adam and SGD, float32 and bfloat16 parameters, grouped-query
attention and a long sequence; and a keras-hub Llama trained with `train_on_batch`).

For every step, compiled for one v5e chip:

1. FLOPs: the matmul FLOPs planc reads from the optimized HLO, loops' trip counts
   multiplied in, against the count from the shapes (`chip_steps.analytic_flops`: 6 N T
   for the weights, attention's T x T, remat's second forward). Goal: within 2%.
2. The peak: the compile's, under the chip's 15.75 GiB, so the step runs there.

With the chip attached (`PLANC_CHIP=1`, on a TPU VM), also:

3. each step runs there (`planc.targets.cost.calibrate.measure_steps`, as
   `planc cost --calibrate` runs it: the median of 10 steps after 2 untimed), and the
   program it ran is kept beside the JSON (`hlo/NAME.hlo.gz`), so `bench/chip_fit.py`
   re-fits from the chip's own programs anywhere;
4. the calibration is fitted on `chip_steps.FIT` (named before the fit) and every other
   step predicted with it. Goal: within +-15% of the measured time;
5. a keras-hub `LlamaCausalLM` built from its config (random weights, mixed bfloat16,
   grouped-query attention) is costed with `plan.cost(model, batch=...)` and that
   calibration, then trained with `model.train_on_batch` on the chip: the prediction
   against the median of 10 calls after 2.

Without the chip, steps 1-2 run on compile-only `v5e:1x1` through libtpu and the
estimates are the peak-rate model's, marked so. `PLANC_CHIP=cpu` rehearses steps 3-5 on
this machine's CPU, priced as a v5e (`chip_kit.py run --rehearse`): the code path, not
the chip's figures.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
if os.environ.get("PLANC_CHIP") == "1":
    # On the chip: JAX finds its platform (`common` would otherwise choose the CPU).
    os.environ.setdefault("JAX_PLATFORMS", "")
elif os.environ.get("PLANC_CHIP") == "cpu":  # the rehearsal: one device, as the chip is one
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=1").strip()

from common import Results, args, keep_program, status  # noqa: E402


def main():
    a = args(__doc__.splitlines()[0])
    on_chip = os.environ.get("PLANC_CHIP") in ("1", "cpu")
    if os.environ.get("PLANC_CHIP") != "1":
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
        kept = Path(a.json).parent / "hlo" if a.json else None
        reports = _measured(plan, results, kept, a.size)
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
        peak = report.aot.peak
        if name not in chip_steps.NAMES:  # the keras-hub model: costed calibrated, above
            results.row(f"`{name}`: compiled peak", f"{peak / 2**30:.2f} GiB",
                        f"fits {usable / 2**30:.2f} GiB", status(peak <= usable), peak=peak)
            continue
        hlo, expected = report.counts.flops["matmul"], chip_steps.analytic_flops(name)
        off = hlo / expected - 1
        worst = max(worst, abs(off))
        results.row(f"`{name}`: matmul FLOPs, HLO vs shapes",
                    f"{hlo / 1e12:.4f} vs {expected / 1e12:.4f} TFLOP ({off:+.3%})",
                    "within 2%", status(abs(off) <= 0.02), hlo=hlo, expected=expected)
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


def _measured(plan, results, kept, size):
    """Steps 3-5 of the module docstring, on the attached chip: `[(name, CostReport)]`."""
    import tempfile

    import jax

    import chip_steps
    import planc
    from planc.targets.aot.topology import attached_topology
    from planc.targets.cost.calibrate import fitted_run, measure_steps
    from planc.targets.cost.chips import chip_for, chip_named
    from planc.targets.cost.fitting import estimate
    from planc.targets.cost.model import bounds, op_terms
    from planc.targets.cost.report import seconds_text

    topology = attached_topology()
    row = chip_named("v5e") if topology.platform == "cpu" else chip_for(topology.device_kind)
    results.note(f"{topology.device_kind} x {len(topology.devices)}, JAX {jax.__version__}, "
                 f"{time.strftime('%Y-%m-%d')}; measured: the median of 10 steps after 2"
                 + ("; a rehearsal on the CPU, priced as a v5e" if topology.platform == "cpu"
                    else ""))
    steps = []
    for name in chip_steps.NAMES:
        # One step at a time: a step the chip refuses is a row, not the end of the run.
        try:
            steps += measure_steps(plan.ir, [f"chip_steps:{name}"], topology, row.name,
                                   repeats=10, warmup=2, plan_of=lambda ir: plan)
        except planc.PlanError as exc:
            d = exc.diagnostics[0]
            results.row(f"`{name}`: measured on the chip", f"{d.code}: {d.message}", "runs",
                        status(False))
            continue
        keep_program(kept, name, steps[-1].cost.aot.program.hlo)
        print(f"{name}: {seconds_text(steps[-1].timing.seconds)} a step", flush=True)
    fitted_on = [s for s in steps if s.spec.split(":")[1] in chip_steps.FIT]
    run = fitted_run(plan.ir, fitted_on, topology, row, 10)
    calibration = run.fit.calibration
    results.data["calibration"] = run.document()
    worst = 0.0
    for s in steps:
        name = s.spec.split(":")[1]
        predicted = estimate(s.sample, calibration)
        lower, upper, _ = bounds(op_terms(s.sample.profile, calibration), calibration)
        error = predicted / s.timing.seconds - 1
        fitted = name in chip_steps.FIT
        if not fitted:
            worst = max(worst, abs(error))
        results.row(f"`{name}`: predicted vs measured step time"
                    + (" (fitted on)" if fitted else ""),
                    f"{seconds_text(predicted)} vs {seconds_text(s.timing.seconds)} "
                    f"({error:+.1%})", "" if fitted else "within 15%",
                    "" if fitted else status(abs(error) <= 0.15), predicted_s=predicted,
                    measured_s=s.timing.seconds, lower_s=lower, upper_s=upper,
                    samples=list(s.timing.samples))
    results.note(f"fitted {', '.join(run.fit.fitted)}: " + ", ".join(
        f"{k} {run.fit.efficiency[k]:.3f}" for k in run.fit.fitted if k in run.fit.efficiency)
        + f"; worst prediction error on the other steps {worst:.1%}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "v5e.json"
        path.write_text(json.dumps(results.data["calibration"]))
        keras_report = _keras_hub(plan, results, topology, str(path), kept, size)
    return [(s.spec.split(":")[1], s.cost) for s in steps] + (
        [("keras_hub_llama", keras_report)] if keras_report is not None else [])


# The keras-hub check: a Llama-style CausalLM from its config (the `full` sizes: 311 M
# parameters, 16 query heads over 4 key/value heads, 8 x 1,024 tokens), random weights.
_KERAS = {"full": ({"vocabulary_size": 32000, "num_layers": 4, "num_query_heads": 16,
                    "num_key_value_heads": 4, "hidden_dim": 2048, "intermediate_dim": 5632},
                   8, 1024),
          "tiny": ({"vocabulary_size": 1024, "num_layers": 2, "num_query_heads": 4,
                    "num_key_value_heads": 2, "hidden_dim": 256, "intermediate_dim": 512},
                   2, 64)}


def _keras_hub(plan, results, topology, calibration, kept, size):
    """Step 5 of the module docstring: the model's `CostReport`, or None where it failed
    (a row says why)."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import statistics

    import jax
    import jax.numpy as jnp
    import keras
    import keras_hub
    import numpy as np

    import planc
    from planc.targets.cost.report import seconds_text

    config, rows, sequence = _KERAS[size]
    figure = "`keras_hub_llama`: predicted vs measured step time (`train_on_batch`)"
    backbone = keras_hub.models.LlamaBackbone(**config, dtype="mixed_bfloat16")
    model = keras_hub.models.LlamaCausalLM(backbone=backbone, preprocessor=None)
    model.compile(optimizer=keras.optimizers.Adam(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  weighted_metrics=[])
    ids = jax.ShapeDtypeStruct((rows, sequence), jnp.int32)
    try:
        report = plan.cost(model, batch=({"token_ids": ids, "padding_mask": ids}, ids),
                           topology=topology, calibration=calibration, chip="v5e")
    except planc.PlanError as exc:
        d = exc.diagnostics[0]
        results.row(figure, f"{d.code}: {d.message}", "within 15%", status(False))
        return None
    keep_program(kept, "keras_hub_llama", report.aot.program.hlo)
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(0, config["vocabulary_size"], (rows, sequence),
                                   dtype=np.int32),
         "padding_mask": np.ones((rows, sequence), np.int32)}
    y = rng.integers(0, config["vocabulary_size"], (rows, sequence), dtype=np.int32)
    samples = []
    for i in range(12):  # train_on_batch returns the loss as a host value: each call waits
        started = time.perf_counter()
        model.train_on_batch(x, y)
        if i >= 2:
            samples.append(time.perf_counter() - started)
    measured = statistics.median(samples)
    error = report.estimate_s / measured - 1
    results.row(figure, f"{seconds_text(report.estimate_s)} vs {seconds_text(measured)} "
                        f"({error:+.1%}); {backbone.count_params() / 1e6:.0f} M parameters, "
                        f"{rows} x {sequence} tokens",
                "within 15%", status(abs(error) <= 0.15), predicted_s=report.estimate_s,
                measured_s=measured, lower_s=report.lower_s, upper_s=report.upper_s,
                samples=samples)
    return report


if __name__ == "__main__":
    main()

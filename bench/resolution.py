"""Benchmark 1: resolution at scale, planc against the Keras LayoutMap lookup loop.

For V variable paths and R rules, planc's ``Resolver(ir).resolve_all(variables)``
(a fresh Resolver each run; its RE2 sets are compiled once per plan and reused, as by
every ``plan.resolve``; benchmark 11 shows the first call's cost) is timed against
``[layout_map[path] for path in paths]`` on a real ``keras.distribution.LayoutMap``
holding the same rules over a real 8-device ``DeviceMesh``. The two must give the same
layout for every path before any time is taken. Keras has no `default`: a path no key
matches gets None, which ModelParallel treats as replicated, as planc's
``default -> replicated`` does.

When the Keras loop over every path would take too long to repeat, a uniform sample
of the paths (every k-th) is timed and the time scaled by V / sample size; the table
says so. Answers are still compared on every path, once.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Results, args, median_time, status  # noqa: E402
from models import model_for, resolution_cell  # noqa: E402

FULL = {"sizes": (1_000, 10_000, 100_000), "rules": (10, 100, 500)}
TINY = {"sizes": (300,), "rules": (10, 40)}
TARGET = 50.0  # planc at least 50x faster than Keras at the largest size
# CPU-time budget for the repeated Keras timing of one (V, R) cell; above it, sample
# (never fewer than MIN_SAMPLE paths).
KERAS_BUDGET_S = 12.0
MIN_SAMPLE = 2_000


def _norm(axes, rank: int):
    axes = tuple(axes) if axes is not None else (None,) * rank
    return "replicated" if all(a is None for a in axes) else axes


def keras_layout_map(rules, mesh):
    from keras.distribution import LayoutMap, TensorLayout

    lm = LayoutMap(mesh)
    for key, axes in rules.keras_entries():
        lm[key] = TensorLayout(axes)
    return lm


def run_cell(V: int, R: int, mesh, results: Results, keras_budget: float):
    from planc.resolve import Resolver

    model, rules, plan, variables, paths = resolution_cell(V, R)
    ir = plan.ir
    lm = keras_layout_map(rules, mesh)

    # Same answers first, on every path (this is also the warm-up of both sides).
    t = time.process_time()
    keras_answers = [lm[p] for p in paths]
    keras_once = time.process_time() - t
    resolution = Resolver(ir).resolve_all(variables)
    errors = [d for d in resolution.diagnostics if d.is_error]
    if errors:
        raise SystemExit(f"planc reports errors on the generated plan: {errors[0].message}")
    for var, a, k in zip(variables, resolution.assignments, keras_answers):
        mine = _norm(a.layout.axes, var.rank)
        theirs = _norm(None if k is None else k.axes, var.rank)
        if mine != theirs:
            raise SystemExit(f"answers differ at {var.path}: planc {mine}, Keras {theirs}")

    planc_t = median_time(lambda: Resolver(ir).resolve_all(variables), runs=5, warmup=1)

    step = 1
    while keras_once / step * 6 > keras_budget and len(paths) // (2 * step) >= MIN_SAMPLE:
        step *= 2
    sample = paths[::step]
    keras_t = median_time(lambda: [lm[p] for p in sample], runs=5, warmup=1)
    keras_t = keras_t.scaled(len(paths) / len(sample))
    ratio = keras_t.cpu / planc_t.cpu
    how = "" if step == 1 else f"; Keras timed on 1/{step} of the paths ({len(sample):,}), scaled"
    results.row(f"V={len(paths):,} ({model.name}) x R={R}",
                f"{ratio:.1f}x (planc {_ms(planc_t.cpu)}, Keras {_ms(keras_t.cpu)} CPU; "
                f"wall {_ms(planc_t.wall)} vs {_ms(keras_t.wall)}{how})",
                ">= 1x", status(ratio >= 1), V=len(paths), R=R,
                model=model.name, planc_cpu_s=planc_t.cpu, keras_cpu_s=keras_t.cpu,
                planc_wall_s=planc_t.wall, keras_wall_s=keras_t.wall, ratio=ratio,
                sampled=step, planc_us_per_var=planc_t.cpu / len(paths) * 1e6,
                keras_us_per_var=keras_t.cpu / len(paths) * 1e6)
    return ratio


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def main():
    a = args(__doc__.splitlines()[0])
    grid = TINY if a.size == "tiny" else FULL
    results = Results("resolution", "Resolution at scale: planc vs Keras LayoutMap loop", a.size)

    import jax
    from keras.distribution import DeviceMesh

    devices = jax.devices()
    if len(devices) != 8:
        raise SystemExit(f"needs 8 devices (XLA_FLAGS=--xla_force_host_platform_device_count=8), "
                         f"found {len(devices)}")
    mesh_bd = DeviceMesh((4, 2), ["batch", "model"], devices)
    mesh_fm = DeviceMesh((4, 2), ["fsdp", "model"], devices)

    ratios = {}
    for V in grid["sizes"]:
        mesh = mesh_fm if model_for(V).name == "hf_moe" else mesh_bd
        for R in grid["rules"]:
            ratios[(V, R)] = run_cell(V, R, mesh, results, KERAS_BUDGET_S)
    top = ratios[(max(grid["sizes"]), max(grid["rules"]))]
    V = len(model_for(max(grid["sizes"])).paths())
    results.row(f"speed-up at V={V:,} x R={max(grid['rules'])}", f"{top:.1f}x",
                f">= {TARGET:g}x", status(top >= TARGET) if a.size == "full" else "n/a (tiny)")
    worst = min(ratios.values())
    results.row("slowest cell", f"{worst:.1f}x", ">= 1x (never slower)", status(worst >= 1))
    results.note("models (bench/models.py): keras_dense is Gemma-7B-shaped in keras-hub "
                 "names (9 variables a block); hf_moe a Qwen-MoE-shaped Hugging Face checkpoint "
                 "(64 experts a layer); keras_moe an unstacked 512-expert MoE in keras-hub "
                 "names, 65 layers. Rules: the keras-hub get_layout_map keys at R=10, then "
                 "per-layer and per-expert-range rules (`decoder_block_(?:[0-9]|1[0-2])/...`), "
                 "never overlapping, ending in `default -> replicated` (Keras: no key, so "
                 "None, which ModelParallel replicates). Answers were compared on every path "
                 "before timing.")
    results.note("times are medians of 5 runs after a warm-up; the ratio is of CPU time "
                 "(this process), as the 2-core machine is shared; wall times are shown too")
    results.ratio("resolution_speedup", top, "(Keras time / planc time at the largest cell)",
                  a.json)


if __name__ == "__main__":
    main()

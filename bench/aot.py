"""`planc aot` against the same training step compiled by hand with JAX, and the
topology lint against that compile.

- **Overhead** (`plan.aot` / the hand-written compile, target <= 1.1x): a multi-layer MLP
  with Adam, FSDP x tensor parallel, compiled by `plan.aot` and by
  `jax.jit(step, in_shardings, out_shardings, donate_argnums).trace().lower().compile()`
  with the same shardings written out, then `memory_analysis()` and `as_text()` as the
  report reads them. Each repetition compiles a fresh step function for both (so no
  cache answers), the two interleaved; the figure is the median of the per-repetition
  ratios of CPU time (the load on a shared machine moves one repetition's timings alike).
  The two compiles' memory figures are compared before anything is timed.
- **Topology lint** (`planc lint PLAN --topology NAME` as a command, start-up included /
  the hand-written compile on that topology, target <= 0.2x).

`cpu:8` always; the TPU topology `v5e:2x4` (compile-only) when libtpu is installed.
"""

from __future__ import annotations

import gc
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, Results, args, command_time, status  # noqa: E402

OVERHEAD_TARGET = 1.1
LINT_TARGET = 0.2

PLAN = '''plan mlp_bench
mesh(fsdp = 4, model = 2)
model_parallel(batch = fsdp)
layout {
    "layer_\\d+/kernel" -> (fsdp, model)
    "layer_\\d+/bias"   -> (model)
}
'''


def model(layers: int, width: int, batch: int):
    import jax
    import jax.numpy as jnp

    f32 = jnp.float32
    params = {f"layer_{i}": {"kernel": jax.ShapeDtypeStruct((width, width), f32),
                             "bias": jax.ShapeDtypeStruct((width,), f32)}
              for i in range(layers)}
    data = {"x": jax.ShapeDtypeStruct((batch, width), f32),
            "y": jax.ShapeDtypeStruct((batch, width), f32)}
    return params, data


def fresh_step(optimizer):
    """A new step function each call: its own trace, lowering and compile."""
    import jax
    import jax.numpy as jnp
    import optax

    def loss_fn(p, b):
        h = b["x"]
        for name in sorted(p, key=lambda n: int(n.split("_")[1])):
            h = jnp.tanh(h @ p[name]["kernel"] + p[name]["bias"])
        return jnp.mean((h - b["y"]) ** 2)

    def step(p, s, b):
        loss, g = jax.value_and_grad(loss_fn)(p, b)
        u, s = optimizer.update(g, s, p)
        return optax.apply_updates(p, u), s, loss

    return step


def hand_compile(topology: str, step, params, state, data):
    """The step compiled as a hand-written loop compiles it; the report's reads included."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    if topology.startswith("cpu:"):
        mesh = Mesh(np.asarray(jax.devices()[:8]).reshape(4, 2), ("fsdp", "model"))
        platform = "cpu"
    else:
        from jax.experimental import topologies

        mesh = topologies.make_mesh(topologies.get_topology_desc(topology, "tpu"), (4, 2),
                                    ("fsdp", "model"))
        platform = "tpu"

    def spec(leaf):
        return NamedSharding(mesh, P("fsdp", "model") if leaf.ndim == 2 else
                             P("model") if leaf.ndim == 1 else P())

    ps, ss = jax.tree.map(spec, params), jax.tree.map(spec, state)
    bs = jax.tree.map(lambda _: NamedSharding(mesh, P("fsdp", None)), data)
    compiled = jax.jit(step, in_shardings=(ps, ss, bs),
                       out_shardings=(ps, ss, NamedSharding(mesh, P())),
                       donate_argnums=(0, 1)).trace(params, state, data).lower(
        lowering_platforms=(platform,)).compile()
    stats = compiled.memory_analysis()
    compiled.as_text()
    return stats


def overhead(results, topology: str, shape: tuple[int, int, int], runs: int) -> float:
    import jax
    import optax

    import planc

    plan = planc.loads(PLAN, file="mlp_bench.kd")
    optimizer = optax.adam(1e-3)
    params, data = model(*shape)
    state = jax.eval_shape(optimizer.init, params)

    def ours():
        return plan.aot(fresh_step(optimizer), params, state, data, topology=topology)

    def theirs():
        return hand_compile(topology, fresh_step(optimizer), params, state, data)

    report, hand = ours(), theirs()  # warm-up, and the answers compared
    for name in ("argument", "output", "alias", "temp", "generated_code"):
        if report.memory[name] != getattr(hand, f"{name}_size_in_bytes"):
            raise SystemExit(f"planc's {name} differs from the hand-written compile's")
    ratios, mine, by_hand = [], [], []
    for _ in range(runs):
        times = []
        for fn in (ours, theirs):
            gc.collect()
            gc.disable()
            try:
                t = time.process_time()
                fn()
                times.append(time.process_time() - t)
            finally:
                gc.enable()
        mine.append(times[0])
        by_hand.append(times[1])
        ratios.append(times[0] / times[1])
    ratio = sorted(ratios)[len(ratios) // 2]
    compile_s = sorted(by_hand)[len(by_hand) // 2]
    layers, width, batch = shape
    results.row(f"plan.aot / hand-written compile, {topology}, {layers}-layer MLP "
                f"{width}x{width} + Adam, batch {batch}",
                f"{ratio:.3f}x (planc {sorted(mine)[len(mine) // 2]:.2f} s CPU, by hand "
                f"{compile_s:.2f} s CPU; peak {report.peak / 2**20:.1f} MiB)",
                f"<= {OVERHEAD_TARGET}x", status(ratio <= OVERHEAD_TARGET),
                topology=topology, ratio=ratio, planc_cpu_s=mine, hand_cpu_s=by_hand)
    return ratio, compile_s


def topology_lint(results, topology: str, compile_s: float, runs: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "mlp_bench.kd"
        plan.write_text(PLAN)
        t = command_time([PYTHON, "-m", "planc", "lint", str(plan), "--topology", topology,
                          "-q"], runs=runs, warmup=1)
    ratio = t.cpu / compile_s
    results.row(f"`planc lint --topology {topology}` (a command, start-up included) / the "
                "hand-written compile", f"{ratio:.3f}x ({t.cpu:.2f} s CPU, {t.wall:.2f} s "
                f"wall; the compile {compile_s:.2f} s CPU)", f"<= {LINT_TARGET}x",
                status(ratio <= LINT_TARGET), topology=topology, ratio=ratio,
                lint_cpu_s=t.cpu_runs, lint_wall_s=t.wall_runs)
    return ratio


def main():
    a = args(__doc__.splitlines()[0])
    results = Results("aot", "planc aot against the hand-written compile", a.size)
    tiny = a.size == "tiny"
    runs = 1 if tiny else 5
    worst, _ = overhead(results, "cpu:8", (2, 256, 32) if tiny else (4, 2048, 256), runs)
    if importlib.util.find_spec("libtpu") is not None:
        shape = (2, 256, 32) if tiny else (4, 2048, 256)
        ratio, compile_s = overhead(results, "v5e:2x4", shape, 1 if tiny else 3)
        worst = max(worst, ratio)
        topology_lint(results, "v5e:2x4", compile_s, 1 if tiny else 3)
    else:
        results.note("libtpu is not installed: the TPU rows were not measured "
                     "(pip install 'planc[tpu]')")
    results.ratio("aot_overhead", worst, "x the hand-written compile's CPU time (worst "
                  "topology)", a.json)


if __name__ == "__main__":
    main()

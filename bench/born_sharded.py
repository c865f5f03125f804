"""Benchmark 3: born-sharded initialisation, peak host memory of `plan.init(init_fn)`
against the naive `plan.shard(jax.jit(init_fn)())`, on 8 simulated CPU devices.

Each variant runs in a fresh process (`--child`), and its peak RSS is read as the
wrapper's ``RUSAGE_CHILDREN.ru_maxrss``.

Each variant's RSS just before the call is the runtime's own footprint (imports,
mesh, devices); what the call adds on top, up to the peak, is its cost, shown as a
multiple of the model's bytes. The call is the user's expression as written, so its
tracing and compiling are inside the measured window for both.

The 8 simulated devices are one host's memory, so the sharded parameters themselves
take 1x the model's bytes in total (1/8 on each "device"): the floor for both. The
naive path first builds every array whole on device 0 and then copies it into shards,
so it holds about 2x at its peak; born sharded, each device computes only its own
shards and the whole model never exists at once.

XLA's own temporaries come on top. XLA:CPU's default (concurrency-optimised)
scheduler keeps the random bits of every leaf alive at once, about 1x the model more;
both variants are therefore also run with its memory-minimising scheduler
(`--xla_cpu_enable_concurrency_optimized_scheduler=false`), which shows what is the
scheduler's and what is the sharding's.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PLAN = """
plan born_sharded
mesh(data = 4, model = 2)
model_parallel(batch = data)
layout {
    "layers/\\d+/w_(in|gate)" -> (data, model)
    "layers/\\d+/w_out"       -> (model, data)
    "embed"                  -> (model, data)
    default                  -> replicated
}
"""

SIZES = {"tiny": (4, 512, 1024), "full": (10, 2048, 4096)}  # (layers, d_model, d_ff)
# XLA:CPU's default scheduler runs independent ops concurrently and keeps their
# temporaries alive together; this flag makes it schedule for memory instead.
MEMORY_SCHEDULER = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


PEAK_TARGET = 1.1
WALL_TARGET = 1.5


def model_bytes(size: str) -> int:
    layers, d, f = SIZES[size]
    return 4 * (layers * 3 * d * f + 8192 * d + layers * d)


def make_init(size: str):
    import jax
    import jax.numpy as jnp

    layers, d, f = SIZES[size]

    def init_fn():
        keys = jax.random.split(jax.random.key(0), 3 * layers + 1)
        params = {"embed": jax.random.normal(keys[-1], (8192, d), jnp.float32), "layers": {}}
        for i in range(layers):
            params["layers"][str(i)] = {
                "w_in": jax.random.normal(keys[3 * i], (d, f), jnp.float32) * 0.02,
                "w_gate": jax.random.normal(keys[3 * i + 1], (d, f), jnp.float32) * 0.02,
                "w_out": jax.random.normal(keys[3 * i + 2], (f, d), jnp.float32) * 0.02,
                "norm": jnp.ones((d,), jnp.float32),
            }
        return params

    return init_fn


def child(mode: str, size: str) -> None:
    import gc
    import time

    import jax

    import planc

    if len(jax.devices()) != 8:
        raise SystemExit(f"needs 8 devices, found {len(jax.devices())}")
    plan = planc.loads(PLAN)
    init_fn = make_init(size)
    # Compiled once up front only to read its memory analysis; each variant then runs
    # exactly the user's expression, its own tracing and compiling inside the window.
    if mode == "born":
        from planc.targets.jax import init_jit

        stats = init_jit(plan.ir, init_fn)[0].lower().compile().memory_analysis()
        devices = 8  # one SPMD program, run on each device
    else:
        stats = jax.jit(init_fn).lower().compile().memory_analysis()
        devices = 1
    temp = stats.temp_size_in_bytes * devices
    # What the busiest device needs while the program runs: its outputs and temporaries.
    one_device = stats.output_size_in_bytes + stats.temp_size_in_bytes
    gc.collect()
    from common import rss

    before = rss()
    t = time.perf_counter()
    if mode == "born":
        params = plan.init(init_fn)
    elif mode == "naive":
        params = plan.shard(jax.jit(init_fn)())
    else:  # the unsharded result complete before it is sharded
        params = plan.shard(jax.block_until_ready(jax.jit(init_fn)()))
    jax.block_until_ready(params)
    dt = time.perf_counter() - t
    leaves = jax.tree_util.tree_leaves(params)
    held = sum(s.data.nbytes for leaf in leaves for s in leaf.addressable_shards)
    whole = sum(leaf.nbytes for leaf in leaves)
    print(f"BEFORE {before} HELD {held} WHOLE {whole} SECONDS {dt} TEMP {temp} "
          f"ONE_DEVICE {one_device}")


def main():
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        child(sys.argv[i + 1], sys.argv[i + 2])
        return
    from common import ENV, PYTHON, Results, args, gib, peak_memory, status

    a = args(__doc__.splitlines()[0])
    results = Results("born_sharded", "Born-sharded initialisation: peak host memory", a.size)
    nbytes = model_bytes(a.size)
    results.row("model size (float32, 8 simulated CPU devices)", gib(nbytes), model_bytes=nbytes)
    me = str(Path(__file__).resolve())
    cost, wall = {}, {}
    variants = [("born", "", "plan.init(init_fn)"),
                ("naive", "", "plan.shard(jax.jit(init_fn)())"),
                ("born", MEMORY_SCHEDULER, "plan.init(init_fn), memory scheduler"),
                ("naive", MEMORY_SCHEDULER, "plan.shard(jax.jit(init_fn)()), memory scheduler"),
                ("naive_ready", MEMORY_SCHEDULER,
                 "plan.shard(jax.block_until_ready(jax.jit(init_fn)())), memory scheduler")]
    if a.size == "tiny":
        variants = variants[:2]
    for mode, flags, what in variants:
        env = dict(ENV, XLA_FLAGS=(ENV["XLA_FLAGS"] + " " + flags).strip())
        peak, _, out = peak_memory([PYTHON, me, "--child", mode, a.size], env=env)
        f = out.split()
        before, held = int(f[f.index("BEFORE") + 1]), int(f[f.index("HELD") + 1])
        seconds = float(f[f.index("SECONDS") + 1])
        temp = int(f[f.index("TEMP") + 1])
        one_device = int(f[f.index("ONE_DEVICE") + 1])
        cost[(mode, flags)] = (peak - before) / nbytes
        wall[(mode, flags)] = seconds
        results.row(f"`{what}`: peak RSS", f"{gib(peak)}; the call adds {gib(peak - before)} "
                    f"= **{cost[(mode, flags)]:.2f}x** the model (runtime before it "
                    f"{gib(before)}; XLA temporaries {temp / nbytes:.2f}x; {seconds:.1f} s)",
                    peak_bytes=peak, before_bytes=before, held_bytes=held, temp_bytes=temp,
                    seconds=seconds, ratio=cost[(mode, flags)], xla_flags=flags,
                    one_device_bytes=one_device)
        if not flags:
            results.row(f"  busiest single device while `{what}` runs",
                        f"{gib(one_device)} = {one_device / nbytes:.2f}x the model "
                        "(compiled outputs + temporaries on one device)",
                        one_device_bytes=one_device)
    born, naive = cost[("born", "")], cost[("naive", "")]
    full = a.size == "full"
    results.row("plan.init: peak above the runtime / model bytes", f"{born:.2f}x",
                f"<= {PEAK_TARGET}x", status(born <= PEAK_TARGET) if full else "n/a (tiny)")
    slower = wall[("born", "")] / wall[("naive", "")]
    results.row("plan.init wall time / init-then-shard's (`plan.shard(jax.jit(init_fn)())`)",
                f"{slower:.2f}x", f"<= {WALL_TARGET}x",
                status(slower <= WALL_TARGET) if full else "n/a (tiny)", ratio=slower)
    results.row("naive: peak above the runtime / model bytes", f"{naive:.2f}x",
                "about 2x (baseline)", "")
    if full:
        tuned = cost[("born", MEMORY_SCHEDULER)]
        results.row(f"plan.init with XLA_FLAGS={MEMORY_SCHEDULER}", f"{tuned:.2f}x",
                    "<= 1.2x", status(tuned <= 1.2))
    if full:
        results.note("with the memory scheduler the literal `plan.shard(jax.jit(init_fn)())` "
                     "stays near 1.2x on CPU: dispatch is asynchronous, `plan.shard` returns "
                     "before the unsharded leaves are computed, and each is freed once its "
                     "shards are copied, while later leaves are still being computed. When the "
                     "unsharded result is complete before it is sharded "
                     "(`plan.shard(jax.block_until_ready(jax.jit(init_fn)()))`, or anything "
                     "that reads it first), the whole model and its shards coexist: "
                     f"{cost[('naive_ready', MEMORY_SCHEDULER)]:.2f}x. On accelerators the naive "
                     "path needs the whole model on one device (the 'busiest single device' rows).")
    results.note("each variant runs in a fresh process; the runtime (imports, mesh, "
                 "devices) is its RSS just before the call, subtracted from "
                 "its peak (the wrapper's RUSAGE_CHILDREN ru_maxrss). The 8 simulated devices "
                 "share host memory, so the sharded parameters alone are 1x the model, and "
                 "'XLA temporaries' is the compiled program's temp_size_in_bytes summed over "
                 "the 8 devices.")
    results.ratio("born_sharded_peak", born,
                  "(plan.init peak above the runtime / model bytes)", a.json)


if __name__ == "__main__":
    main()

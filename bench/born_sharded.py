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
`plan.init` compiles its program with the memory-minimising scheduler instead (chosen
for that one compilation), and the naive path is also run with it for the whole process
(`--xla_cpu_enable_concurrency_optimized_scheduler=false`), which shows what is the
scheduler's and what is the sharding's. `plan.init`'s fallback, for an XLA that refuses
the option (groups of outputs, one program each), and `plan.init` without giving freed
memory back (`malloc_trim`) are run too. At full size the two compared variants run in
alternating pairs, `REPEATS` times: the wall ratio is the median of the pairs', the
peak the worst run's.

Each variant's memory analysis comes from compiling a separate but identical
initialiser before the window: JAX caches compiled programs by function, and the same
function compiled up front would let the measured call skip its compilation.
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
REPEATS = 3  # pairs of (plan.init, init-then-shard) runs at full size


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
    from planc.targets.jax import sharding as backend

    if mode == "born_groups":
        # What `plan.init` does where XLA refuses the memory scheduler's option.
        backend._cpu_memory_scheduler = lambda mesh=None: None
    elif mode == "born_untrimmed":
        # What giving freed memory back to the OS (`malloc_trim`) saves.
        backend._return_freed_memory = lambda: None
    # Compiled once up front only to read its memory analysis, from a twin of the
    # initialiser (a separate function, so nothing is cached for the measured call);
    # each variant then runs exactly the user's expression, its own tracing and
    # compiling inside the window.
    twin = make_init(size)
    if mode.startswith("born"):
        stats = backend.init_jit(plan.ir, twin)[0].lower().compile().memory_analysis()
        devices = 8  # one SPMD program, run on each device
    else:
        stats = jax.jit(twin).lower().compile().memory_analysis()
        devices = 1
    del twin
    init_fn = make_init(size)
    temp = stats.temp_size_in_bytes * devices
    # What the busiest device needs while the program runs: its outputs and temporaries.
    one_device = stats.output_size_in_bytes + stats.temp_size_in_bytes
    gc.collect()
    from common import rss

    before = rss()
    t = time.perf_counter()
    if mode.startswith("born"):
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


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


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
    full = a.size == "full"

    def run(mode: str, flags: str) -> dict:
        env = dict(ENV, XLA_FLAGS=(ENV["XLA_FLAGS"] + " " + flags).strip())
        peak, _, out = peak_memory([PYTHON, me, "--child", mode, a.size], env=env)
        f = out.split()
        got = {k: float(f[f.index(k) + 1]) for k in
               ("BEFORE", "HELD", "SECONDS", "TEMP", "ONE_DEVICE")}
        got["PEAK"] = peak
        got["COST"] = (peak - got["BEFORE"]) / nbytes
        return got

    # The two compared variants alternate, so a pair shares the machine's load (2 shared
    # cores): the wall ratio is the median of the pairs' ratios.
    pairs = [(run("born", ""), run("naive", "")) for _ in range(REPEATS if full else 1)]

    def report(what: str, runs: list[dict], flags: str = "", temp: bool = True,
               busiest: bool = False) -> None:
        worst = max(runs, key=lambda r: r["COST"])
        seconds = ", ".join(f"{r['SECONDS']:.1f}" for r in runs)
        costs = ", ".join(f"{r['COST']:.2f}x" for r in runs)
        temps = f"XLA temporaries {worst['TEMP'] / nbytes:.2f}x; " if temp else ""
        results.row(f"{what}: peak RSS",
                    f"{gib(worst['PEAK'])}; the call adds {gib(worst['PEAK'] - worst['BEFORE'])}"
                    f" = **{worst['COST']:.2f}x** the model (runtime before it "
                    f"{gib(worst['BEFORE'])}; {temps}{seconds} s"
                    + (f"; each run {costs}" if len(runs) > 1 else "") + ")",
                    peak_bytes=worst["PEAK"], before_bytes=worst["BEFORE"],
                    held_bytes=worst["HELD"], temp_bytes=worst["TEMP"],
                    seconds=[r["SECONDS"] for r in runs], ratio=worst["COST"],
                    ratios=[r["COST"] for r in runs], xla_flags=flags,
                    one_device_bytes=worst["ONE_DEVICE"])
        if busiest:
            one = worst["ONE_DEVICE"]
            results.row(f"  busiest single device while {what} runs",
                        f"{gib(one)} = {one / nbytes:.2f}x the model "
                        "(compiled outputs + temporaries on one device)", one_device_bytes=one)

    born_runs, naive_runs = [b for b, _ in pairs], [n for _, n in pairs]
    report("`plan.init(init_fn)`", born_runs, busiest=True)
    report("`plan.shard(jax.jit(init_fn)())`", naive_runs, busiest=True)
    extra = {}
    if full:
        extra["groups"] = run("born_groups", "")
        report("`plan.init(init_fn)` where XLA refuses the memory scheduler (fallback: "
               "6 groups of outputs)", [extra["groups"]], temp=False)
        extra["untrimmed"] = run("born_untrimmed", "")
        report("`plan.init(init_fn)` without `malloc_trim`", [extra["untrimmed"]])
        extra["naive"] = run("naive", MEMORY_SCHEDULER)
        report("`plan.shard(jax.jit(init_fn)())`, memory scheduler", [extra["naive"]],
               MEMORY_SCHEDULER)
        extra["ready"] = run("naive_ready", MEMORY_SCHEDULER)
        report("`plan.shard(jax.block_until_ready(jax.jit(init_fn)()))`, memory scheduler",
               [extra["ready"]], MEMORY_SCHEDULER)
    born = max(r["COST"] for r in born_runs)
    naive = _median([r["COST"] for r in naive_runs])
    results.row("plan.init: peak above the runtime / model bytes (worst run)", f"{born:.2f}x",
                f"<= {PEAK_TARGET}x", status(born <= PEAK_TARGET) if full else "n/a (tiny)")
    each = [b["SECONDS"] / n["SECONDS"] for b, n in pairs]
    slower = _median(each)
    results.row("plan.init wall time / init-then-shard's (`plan.shard(jax.jit(init_fn)())`)",
                f"{slower:.2f}x" + (" (median of " + ", ".join(f"{x:.2f}" for x in each)
                                    + ")" if len(each) > 1 else ""),
                f"<= {WALL_TARGET}x",
                status(slower <= WALL_TARGET) if full else "n/a (tiny)", ratio=slower,
                ratios=each)
    results.row("naive: peak above the runtime / model bytes", f"{naive:.2f}x",
                "about 2x (baseline)", "")
    if full:
        groups = extra["groups"]
        results.row("fallback (6 groups): peak / wall time against init-then-shard's",
                    f"{groups['COST']:.2f}x / "
                    f"{groups['SECONDS'] / _median([r['SECONDS'] for r in naive_runs]):.2f}x",
                    "", "")
        temp_born = born_runs[0]["TEMP"] / nbytes
        temp_naive = naive_runs[0]["TEMP"] / nbytes
        results.note(
            "how it is met: on the CPU `plan.init` compiles its initialiser once, with "
            "XLA:CPU's memory-minimising scheduler chosen for that one compilation "
            "(`compiler_options`, not `XLA_FLAGS`), which keeps about one leaf's random "
            f"bits alive at a time: XLA temporaries {temp_born:.2f}x the model against "
            f"{temp_naive:.2f}x under the default concurrency-optimised scheduler, which "
            "keeps every leaf's at once. The option's spelling changed: "
            "`xla_cpu_scheduler_type=CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED` on current "
            "jaxlib, the boolean `xla_cpu_enable_concurrency_optimized_scheduler=false` on "
            "jaxlib 0.7 (current jaxlib still accepts the boolean per compilation but "
            "ignores it), so `plan.init` takes the first that XLA accepts, tried once per "
            "process on a trivial program. Between compiling and running it calls glibc's "
            "`malloc_trim(0)`: the compiler's freed working memory otherwise stays resident "
            "and the program's large buffers do not reuse it (without the trim: "
            f"{extra['untrimmed']['COST']:.2f}x); once more after running, for the freed "
            "temporaries. "
            "One compilation, like the baseline's, is why the time is at parity: the old "
            "design (6 groups, one compilation each) is now only the fallback for an XLA "
            "that refuses both spellings (the 'fallback' row). Off the CPU the program is "
            "the plain one: outputs and temporaries are in device memory, which the "
            "accelerators' schedulers already account for. Donation does not apply (the "
            "initialiser has no input buffers), and leaf-by-leaf creation would need the "
            "initialiser's random streams split per leaf, which `plan.init` cannot assume.")
        results.note("with the memory scheduler the literal `plan.shard(jax.jit(init_fn)())` "
                     f"stays at {extra['naive']['COST']:.2f}x on CPU: dispatch is asynchronous, `plan.shard` returns "
                     "before the unsharded leaves are computed, and each is freed once its "
                     "shards are copied, while later leaves are still being computed. When the "
                     "unsharded result is complete before it is sharded "
                     "(`plan.shard(jax.block_until_ready(jax.jit(init_fn)()))`, or anything "
                     "that reads it first), the whole model and its shards coexist: "
                     f"{extra['ready']['COST']:.2f}x. On accelerators the naive "
                     "path needs the whole model on one device (the 'busiest single device' rows).")
    results.note("each variant runs in a fresh process; the runtime (imports, mesh, "
                 "devices, and the twin initialiser compiled for the memory analysis) is its "
                 "RSS just before the call, subtracted from its peak (the wrapper's "
                 "RUSAGE_CHILDREN ru_maxrss). The 8 simulated devices share host memory, so "
                 "the sharded parameters alone are 1x the model, and 'XLA temporaries' is the "
                 "compiled program's temp_size_in_bytes summed over the 8 devices. Both "
                 "variants compile inside the window (the memory analysis is read from a twin "
                 "of the initialiser: compiled from the same function, JAX would have served "
                 "the baseline's call from its cache, as it did before this bench used twins).")
    results.ratio("born_sharded_peak", born,
                  "(plan.init peak above the runtime / model bytes)", a.json)


if __name__ == "__main__":
    main()

"""Benchmark 3: born-sharded initialisation, peak host memory of `plan.init(init_fn)`
against the naive `plan.shard(jax.jit(init_fn)())`, on 8 simulated CPU devices.

Each variant runs in a fresh process (`--child`), and its peak RSS is read as the
wrapper's ``RUSAGE_CHILDREN.ru_maxrss``.

Each variant compiles its program first; its RSS just before the call is the
runtime's own footprint (imports, mesh, compiled program), and what the call adds
on top, up to the peak, is its cost, shown as a multiple of the model's bytes.

The 8 simulated devices are one host's memory, so the sharded parameters themselves
take 1x the model's bytes in total (1/8 on each "device"): the floor for both. The
naive path first builds every array whole on device 0 and then copies it into shards,
so it holds about 2x at its peak; born sharded, each device computes only its own
shards and the whole model never exists at once.
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

SIZES = {"tiny": (4, 512, 1024), "full": (16, 2048, 4096)}  # (layers, d_model, d_ff)


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


def _rss() -> int:
    """This process's resident set now, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def child(mode: str, size: str) -> None:
    import gc
    import time

    import jax

    import planc

    if len(jax.devices()) != 8:
        raise SystemExit(f"needs 8 devices, found {len(jax.devices())}")
    plan = planc.loads(PLAN)
    init_fn = make_init(size)
    # Compile first, so that what is measured from here on is the parameters.
    if mode == "born":
        from planc.backends.jax import init_jit

        init_jit(plan, init_fn)[0].lower().compile()
    else:
        naive = jax.jit(init_fn)
        naive.lower().compile()
    gc.collect()
    before = _rss()
    t = time.perf_counter()
    if mode == "born":
        params = plan.init(init_fn)
    else:
        params = plan.shard(naive())
    jax.block_until_ready(params)
    dt = time.perf_counter() - t
    leaves = jax.tree_util.tree_leaves(params)
    held = sum(s.data.nbytes for leaf in leaves for s in leaf.addressable_shards)
    whole = sum(leaf.nbytes for leaf in leaves)
    print(f"BEFORE {before} HELD {held} WHOLE {whole} SECONDS {dt}")


def main():
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        child(sys.argv[i + 1], sys.argv[i + 2])
        return
    from common import PYTHON, Results, args, gib, peak_memory, status

    a = args(__doc__.splitlines()[0])
    results = Results("born_sharded", "Born-sharded initialisation: peak host memory", a.size)
    nbytes = model_bytes(a.size)
    results.row("model size (float32, 8 simulated CPU devices)", gib(nbytes), model_bytes=nbytes)
    me = str(Path(__file__).resolve())
    cost = {}
    for mode, what in (("born", "plan.init(init_fn)"),
                       ("naive", "plan.shard(jax.jit(init_fn)())")):
        peak, _, out = peak_memory([PYTHON, me, "--child", mode, a.size])
        f = out.split()
        before, held = int(f[f.index("BEFORE") + 1]), int(f[f.index("HELD") + 1])
        seconds = float(f[f.index("SECONDS") + 1])
        cost[mode] = (peak - before) / nbytes
        results.row(f"`{what}`: peak RSS", f"{gib(peak)}; runtime before the call "
                    f"{gib(before)}; the call adds {gib(peak - before)} = "
                    f"{cost[mode]:.2f}x the model ({seconds:.1f} s); params held "
                    f"{held / nbytes:.3f}x", peak_bytes=peak, before_bytes=before,
                    held_bytes=held, seconds=seconds, ratio=cost[mode])
    full = a.size == "full"
    results.row("plan.init: peak above the runtime / model bytes", f"{cost['born']:.2f}x",
                "<= 1.2x", status(cost["born"] <= 1.2) if full else "n/a (tiny)")
    results.row("naive: peak above the runtime / model bytes", f"{cost['naive']:.2f}x",
                "about 2x (baseline)", "")
    results.row("naive / born-sharded peak above the runtime",
                f"{cost['naive'] / cost['born']:.2f}x")
    results.note("each variant runs in a fresh process; the runtime (imports, mesh, the "
                 "compiled init program) is its RSS just before the call, subtracted from "
                 "its peak (the wrapper's RUSAGE_CHILDREN ru_maxrss). The 8 simulated devices "
                 "share host memory, so the sharded parameters alone are 1x the model.")
    results.ratio("born_sharded_peak", cost["born"],
                  "(plan.init peak above the runtime / model bytes)", a.json)


if __name__ == "__main__":
    main()

"""Benchmark 7: loading a checkpoint onto 8 simulated CPU devices, `plan.load(path)`
against `safetensors.numpy.load_file` + `jax.device_put`, and against `load_file` alone.

A safetensors file written by the safetensors library is loaded three ways, each in a
fresh process (`--child`) whose peak RSS is the wrapper's ``RUSAGE_CHILDREN.ru_maxrss``:

- `plan.load(path)`: each device's shard read as a slice of the file (checkpoint
  opened from its checked header; row blocks read with `pread`, other slices copied out
  of a memory map; a variable's shards on several threads);
- `device_put(load_file(path), shardings)`: the whole checkpoint in host memory, then
  copied into the same shardings (the baseline for memory);
- `load_file(path)` alone: the read floor (the baseline for time).

The figures are what each call adds to the process's RSS just before it (imports, mesh
and devices subtracted), against the bytes the plan places on the devices (every
device's shards summed; on a CPU they all live in host memory). The file is read once
before the runs, so every variant reads it from the page cache.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PLAN = r"""
plan load_checkpoint
mesh(data = 4, model = 2)
model_parallel(batch = data)
layout {
    "layers\.\d+\.w_(in|gate)" -> (data, model)
    "layers\.\d+\.w_out"       -> (model, data)
    "embed"                    -> (model, data)
    default                    -> replicated
}
"""

SIZES = {"tiny": (4, 256, 1024), "full": (10, 2048, 4096)}  # (layers, d_model, d_ff)
RUNS = {"tiny": 1, "full": 5}


def write_checkpoint(path: Path, size: str) -> int:
    import numpy as np
    import safetensors.numpy

    layers, d, f = SIZES[size]
    rng = np.random.default_rng(0)
    tensors = {"embed": rng.standard_normal((8192, d), dtype=np.float32)}
    for i in range(layers):
        tensors[f"layers.{i}.w_in"] = rng.standard_normal((d, f), dtype=np.float32)
        tensors[f"layers.{i}.w_gate"] = rng.standard_normal((d, f), dtype=np.float32)
        tensors[f"layers.{i}.w_out"] = rng.standard_normal((f, d), dtype=np.float32)
        tensors[f"layers.{i}.norm"] = np.ones(d, np.float32)
    safetensors.numpy.save_file(tensors, str(path))
    return sum(a.nbytes for a in tensors.values())


def child(mode: str, path: str) -> None:
    import gc
    import time

    import jax
    import safetensors.numpy

    import planc

    if len(jax.devices()) != 8:
        raise SystemExit(f"needs 8 devices, found {len(jax.devices())}")
    plan = planc.loads(PLAN)
    mesh = plan.mesh()
    if mode == "baseline":
        from safetensors import safe_open

        with safe_open(path, framework="numpy") as f:
            shapes = {k: jax.ShapeDtypeStruct(tuple(f.get_slice(k).get_shape()), "float32")
                      for k in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
        placement = plan.shardings(shapes, mesh)
    gc.collect()
    from common import rss

    before = rss()
    t, c = time.perf_counter(), time.process_time()
    if mode == "planc":
        out = plan.load(path)
    elif mode == "baseline":
        out = jax.device_put(safetensors.numpy.load_file(path), placement)
    else:
        out = safetensors.numpy.load_file(path)
    jax.block_until_ready(out)
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    if mode == "read":
        held = sum(a.nbytes for a in out.values())
    else:
        held = sum(s.data.nbytes for a in out.values() for s in a.addressable_shards)
    print(f"BEFORE {before} HELD {held} SECONDS {dt} CPU {cpu}")


def main():
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        child(sys.argv[i + 1], sys.argv[i + 2])
        return
    import tempfile

    from common import PYTHON, Results, args, gib, peak_memory, status

    a = args(__doc__.splitlines()[0])
    results = Results("load_checkpoint", "Loading a checkpoint: peak host memory and time",
                      a.size)
    me = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.safetensors"
        nbytes = write_checkpoint(path, a.size)
        path.read_bytes()  # into the page cache: every variant reads from memory
        results.row("checkpoint (float32, safetensors)", f"{gib(nbytes)} in "
                    f"{4 * SIZES[a.size][0] + 1} tensors", checkpoint_bytes=nbytes)
        found = {}
        for _ in range(RUNS[a.size]):
            for mode in ("planc", "baseline", "read"):
                peak, _, out = peak_memory([PYTHON, me, "--child", mode, str(path)])
                f = out.split()
                found.setdefault(mode, []).append(
                    (peak, int(f[f.index("BEFORE") + 1]), int(f[f.index("HELD") + 1]),
                     float(f[f.index("SECONDS") + 1]), float(f[f.index("CPU") + 1])))
    summary = {}
    for mode, runs in found.items():
        placed = runs[0][2]
        cost = statistics.median((peak - before) / placed for peak, before, *_ in runs)
        seconds = statistics.median(r[3] for r in runs)
        cpu = statistics.median(r[4] for r in runs)
        summary[mode] = (cost, seconds, cpu, placed)
    placed = summary["planc"][3]
    results.row("bytes the plan places on the 8 devices (every shard summed)", gib(placed),
                placed_bytes=placed)
    names = {"planc": "`plan.load(path)`",
             "baseline": "`jax.device_put(load_file(path), shardings)`",
             "read": "`load_file(path)` alone"}
    for mode, (cost, seconds, cpu, held) in summary.items():
        results.row(f"{names[mode]}: peak above the runtime",
                    f"**{cost:.2f}x** the placed bytes; {seconds:.2f} s wall, {cpu:.2f} s CPU",
                    ratio=cost, seconds=seconds, cpu_seconds=cpu, held_bytes=held)
    load_cost, load_s, load_cpu, _ = summary["planc"]
    base_cost = summary["baseline"][0]
    read_s, read_cpu = summary["read"][1], summary["read"][2]
    full = a.size == "full"
    results.row("plan.load: peak above the runtime / placed bytes", f"{load_cost:.2f}x",
                "<= 1.1x", status(load_cost <= 1.1) if full else "n/a (tiny)")
    results.row("load_file + device_put: peak above the runtime / placed bytes",
                f"{base_cost:.2f}x", "about 2x (baseline)", "")
    results.row("plan.load wall / load_file wall", f"{load_s / read_s:.2f}x", "<= 1.2x",
                status(load_s / read_s <= 1.2) if full else "n/a (tiny)")
    results.row("plan.load CPU / load_file CPU", f"{load_cpu / read_cpu:.2f}x", "", "")
    results.note("each variant runs in a fresh process; the runtime (imports, mesh, "
                 "devices) is its RSS just before the call, subtracted from its peak (the "
                 "wrapper's RUSAGE_CHILDREN ru_maxrss). Times are the call alone, medians "
                 f"of {RUNS[a.size]} runs, the file in the page cache.")
    results.note("plan.load reads a shard that is one run of the file's bytes with "
                 "`pread`, any other from a memory map of its tensor's bytes, each copied "
                 "once into a 64-byte aligned buffer that XLA:CPU adopts as the device "
                 "buffer without another copy, a variable's shards on several threads; "
                 "`load_file` copies each tensor once too, contiguously, on one thread. "
                 "So plan.load spends more CPU (strided copies of column-split shards, one "
                 "`make_array_from_callback` per variable) in about the same wall time.")
    results.ratio("load_checkpoint_peak", load_cost,
                  "(plan.load peak above the runtime / bytes placed on the devices)", a.json)


if __name__ == "__main__":
    main()

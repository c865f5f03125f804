"""Benchmark 7: loading a checkpoint onto 8 simulated CPU devices, `plan.load` against
what a careful user writes instead, from one safetensors file, a sharded index and Orbax.

The same tensors (float32, written by the safetensors library) are stored three ways:

- one `.safetensors` file;
- a sharded index: the tensors split over 4 files with a `model.safetensors.index.json`,
  as Hugging Face writes it;
- an Orbax checkpoint, written by `orbax.checkpoint.StandardCheckpointer` from arrays in
  the plan's shardings (as a training job saves).

Each is loaded in fresh processes (`--child FORMAT MODE PATH`), the modes interleaved run
by run, anonymous memory sampled by the parent (`common.peak_anon`):

- `plan.load(path)`, for every format;
- safetensors and index: the loop a careful user writes, `safe_open(file).get_slice(name)`
  indexed per shard inside `jax.make_array_from_callback`, with the plan's shardings;
- safetensors: `jax.device_put(load_file(path), shardings)`;
- safetensors: `load_file(path)` alone, shown as the read floor. It is not a baseline:
  it builds no sharded arrays, only host arrays of the whole checkpoint;
- Orbax: Orbax's own restore with target shardings, `ocp.load(path, abstract)` with
  `orbax.checkpoint.experimental.v1`, the abstract tree of `jax.ShapeDtypeStruct`s with
  `sharding=` the plan's.

Before its timer every child, whatever its mode, imports jax, planc and safetensors (and
Orbax, for the Orbax format) and works out the plan's shardings with `plan.shardings`:
the baselines need them, and so the same imports are warm on both sides. `plan.load`
works them out again inside its call, and imports its own checkpoint readers there. Every child then checksums what
it built (CRC-32 of each device's shard, per variable) and the parent asserts that all
modes and formats built the same arrays before it reports a figure. The files are read
once before the runs, so every variant reads from the page cache.

Memory is what the call adds to the process's anonymous memory over the bytes the plan
places on the devices (every shard summed; on a CPU they all live in host memory).
"""

from __future__ import annotations

import json
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
BUSY_RUNS = 5
INDEX_FILES = 4

# format -> its modes, planc's first; "read" is the floor, not a baseline.
MODES = {"safetensors": ("planc", "user", "device_put", "read"),
         "index": ("planc", "user"),
         "orbax": ("planc", "orbax")}
BASELINES = {"safetensors": ("user", "device_put"), "index": ("user",), "orbax": ("orbax",)}
FORMATS = {"safetensors": "one safetensors file", "index": f"a sharded index ({INDEX_FILES} "
           "files and `model.safetensors.index.json`)", "orbax": "Orbax (`StandardCheckpointer`)"}
NAMES = {"planc": "`plan.load(path)`",
         "user": "`safe_open` + `get_slice` per shard in `make_array_from_callback`",
         "device_put": "`jax.device_put(load_file(path), shardings)`",
         "read": "`load_file(path)` alone (the read floor: no sharded arrays, not a baseline)",
         "orbax": "Orbax's restore with target shardings (`ocp.load(path, abstract)`)"}


# "many": a checkpoint of many small tensors (norms, biases, the small matrices of many
# layers, as MoE checkpoints hold tens of thousands) and a few large ones, benchmark 15
# (bench/load_many.py). Orbax is measured on its first `ORBAX_TENSORS` tensors, where
# Orbax's own restore is quick enough to time.
CASE = "large"
MANY = {"tiny": (125, 1, 512), "full": (1250, 2, 2048)}  # (layers of 8 small, large layers, d)
ORBAX_TENSORS = {"tiny": 200, "full": 1000}
# The goal for "many" is no more memory than before the loader batched small tensors:
# what plan.load took then (anonymous memory over the placed bytes), measured with this
# benchmark at commit 81271ea on this machine, 2026-12-06 (CPU then: 3.62x the best
# baseline from one file, 3.70x from the index, 1.43x from Orbax).
MANY_ANON_BEFORE = {"safetensors": 1.17, "index": 1.18, "orbax": 1.69}


def make_tensors(size: str) -> dict:
    import numpy as np

    if CASE == "many":
        return many_tensors(size)
    layers, d, f = SIZES[size]
    rng = np.random.default_rng(0)
    tensors = {"embed": rng.standard_normal((8192, d), dtype=np.float32)}
    for i in range(layers):
        tensors[f"layers.{i}.w_in"] = rng.standard_normal((d, f), dtype=np.float32)
        tensors[f"layers.{i}.w_gate"] = rng.standard_normal((d, f), dtype=np.float32)
        tensors[f"layers.{i}.w_out"] = rng.standard_normal((f, d), dtype=np.float32)
        tensors[f"layers.{i}.norm"] = np.ones(d, np.float32)
    return tensors


def many_tensors(size: str) -> dict:
    """8 small tensors a layer (1-64 KiB: matrices split over the mesh, norms and biases
    replicated) and a few large layers, float32; the large ones first, as an embedding
    leads a checkpoint."""
    import numpy as np

    layers, large, d = MANY[size]
    rng = np.random.default_rng(0)
    tensors = {"embed": rng.standard_normal((8192, d), dtype=np.float32)}
    for i in range(large):
        tensors[f"layers.{i}.w_in"] = rng.standard_normal((d, 2 * d), dtype=np.float32)
        tensors[f"layers.{i}.w_out"] = rng.standard_normal((2 * d, d), dtype=np.float32)
    small = {"w_in": (64, 128), "w_gate": (32, 128), "w_out": (128, 16), "norm": (256,),
             "bias_in": (128,), "bias_out": (64,), "scale": (1024,), "router": (16, 64)}
    for i in range(large, large + layers):
        for name, shape in small.items():
            tensors[f"layers.{i}.{name}"] = rng.standard_normal(shape, dtype=np.float32)
    return tensors


def write_checkpoint(path: Path, size: str) -> int:
    """One safetensors file at `path`; the checkpoint's bytes."""
    import safetensors.numpy

    tensors = make_tensors(size)
    safetensors.numpy.save_file(tensors, str(path))
    return sum(a.nbytes for a in tensors.values())


def write_index(directory: Path, size: str) -> Path:
    """The same tensors over `INDEX_FILES` files and the index naming them, as Hugging
    Face's `save_pretrained` lays them out; the index's path."""
    import safetensors.numpy

    tensors = make_tensors(size)
    names = list(tensors)
    directory.mkdir()
    weight_map = {}
    for i in range(INDEX_FILES):
        file = f"model-{i + 1:05d}-of-{INDEX_FILES:05d}.safetensors"
        part = {n: tensors[n] for n in names[i::INDEX_FILES]}
        safetensors.numpy.save_file(part, str(directory / file), metadata={"format": "np"})
        weight_map.update({n: file for n in part})
    index = directory / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": sum(
        a.nbytes for a in tensors.values())}, "weight_map": weight_map}, indent=2))
    return index


def write_orbax(source: str, directory: str, plan_text: str = PLAN) -> None:
    """The safetensors file `source` saved by Orbax's `StandardCheckpointer` at
    `directory`, from arrays in the shardings of the plan `plan_text` (run in a child:
    it needs jax)."""
    import jax
    import orbax.checkpoint as ocp
    import safetensors.numpy

    import planc

    plan = planc.loads(plan_text)
    tensors = safetensors.numpy.load_file(source)
    placement = plan.shardings({k: jax.ShapeDtypeStruct(v.shape, v.dtype)
                                for k, v in tensors.items()}, plan.mesh())
    arrays = jax.device_put(tensors, placement)
    del tensors
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(directory, arrays)
    checkpointer.wait_until_finished()


def child(fmt: str, mode: str, path: str, shapes_from: str, check: bool) -> None:
    import gc
    import resource
    import time

    import jax
    import safetensors.numpy
    from safetensors import safe_open

    import planc

    if fmt == "orbax":
        import orbax.checkpoint.experimental.v1 as ocp
    if len(jax.devices()) != 8:
        raise SystemExit(f"needs 8 devices, found {len(jax.devices())}")
    plan = planc.loads(PLAN)
    mesh = plan.mesh()
    with safe_open(shapes_from, framework="numpy") as f:  # the model's shapes, as users know
        shapes = {k: jax.ShapeDtypeStruct(tuple(f.get_slice(k).get_shape()), "float32")
                  for k in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
    # Every mode works out the shardings here, so that planc's code for it is imported
    # and warm for all; `plan.load` still works them out again inside its call.
    placement = plan.shardings(shapes, mesh)
    if mode == "orbax":
        abstract = {k: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=placement[k])
                    for k, s in shapes.items()}
    gc.collect()
    from common import anon_kb, rss

    before, before_anon = rss(), anon_kb() * 1024
    t, c = time.perf_counter(), time.process_time()
    if mode == "planc":
        out = plan.load(path)
    elif mode == "user":
        out = user_loop(path, placement) if fmt == "safetensors" else \
            user_index_loop(path, placement)
    elif mode == "device_put":
        out = jax.device_put(safetensors.numpy.load_file(path), placement)
    elif mode == "orbax":
        out = ocp.load(path, abstract)
    else:
        out = safetensors.numpy.load_file(path)
    jax.block_until_ready(out)
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    held, sums = checksums(out, placement) if check else (0, {})
    print(f"BEFORE {before} ANON {before_anon} MAXRSS {maxrss} HELD {held} SECONDS {dt} "
          f"CPU {cpu}")
    print("SUMS " + json.dumps(sums, sort_keys=True))


def checksums(out: dict, placement) -> tuple[int, dict]:
    """(bytes placed, {name: CRC-32 of each device's shard in device order}) of what a
    mode built; host arrays (`load_file`'s) are cut into the plan's shards first. Each
    variable is dropped once summed, so this adds at most one shard to the memory."""
    import zlib

    import numpy as np

    held, sums = 0, {}
    for name in sorted(out):
        value = out.pop(name)
        if isinstance(value, np.ndarray):
            parts = sorted((d.id, i) for d, i in
                           placement[name].addressable_devices_indices_map(value.shape).items())
            shards = ((d, value[i]) for d, i in parts)
        else:
            shards = sorted(((s.device.id, s.data) for s in value.addressable_shards),
                            key=lambda p: p[0])
        crc = 0
        for _, data in shards:
            data = np.ascontiguousarray(np.asarray(data))
            held += data.nbytes
            crc = zlib.crc32(memoryview(data).cast("B"), crc)
        sums[name] = crc
        del value
    return held, sums


def user_loop(path, shardings):
    """What a careful user writes without planc: each device's shard read with
    safetensors' `get_slice` inside `jax.make_array_from_callback`."""
    import jax
    from safetensors import safe_open

    out = {}
    with safe_open(path, framework="numpy") as f:
        for name in f.keys():  # noqa: SIM118
            part = f.get_slice(name)
            out[name] = jax.make_array_from_callback(
                tuple(part.get_shape()), shardings[name], lambda index, part=part: part[index])
    return out


def user_index_loop(index_path, shardings):
    """The same loop over the files of a sharded index, each file opened once."""
    import os

    out = {}
    with open(index_path) as f:
        weight_map = json.load(f)["weight_map"]
    for file in dict.fromkeys(weight_map.values()):
        out.update(user_loop(os.path.join(os.path.dirname(index_path), file), shardings))
    return out


def hog():
    """A CPU hog per core, for the busy-machine runs; the caller kills them."""
    import os
    import subprocess

    from common import PYTHON

    return [subprocess.Popen([PYTHON, "-c", "while True: pass"])
            for _ in range(os.cpu_count() or 2)]


def main():
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        child(*sys.argv[i + 1:i + 5], check="--check" in sys.argv)
        return
    if "--write-orbax" in sys.argv:
        i = sys.argv.index("--write-orbax")
        write_orbax(sys.argv[i + 1], sys.argv[i + 2])
        return
    import subprocess
    import tempfile

    from common import ENV, PYTHON, Results, args, gib, peak_anon

    a = args(__doc__.splitlines()[0])
    results = Results("load_checkpoint" if CASE == "large" else "load_many",
                      "Loading a checkpoint: CPU time and anonymous memory against a careful "
                      "user's code", a.size)
    me = str(Path(__file__).resolve())
    full = a.size == "full"

    with tempfile.TemporaryDirectory() as tmp:
        single = Path(tmp) / "model.safetensors"
        nbytes = write_checkpoint(single, a.size)
        index = write_index(Path(tmp) / "sharded", a.size)
        orbax_dir = Path(tmp) / "orbax"
        shapes = {"safetensors": single, "index": single, "orbax": single}
        orbax_names = None  # all of them
        if CASE == "many":
            import safetensors.numpy

            part = dict(list(make_tensors(a.size).items())[:ORBAX_TENSORS[a.size]])
            shapes["orbax"] = Path(tmp) / "orbax_source.safetensors"
            safetensors.numpy.save_file(part, str(shapes["orbax"]))
            orbax_names = sorted(part)
            del part
        subprocess.run([PYTHON, me, "--write-orbax", str(shapes["orbax"]), str(orbax_dir)],
                       env=ENV, check=True, capture_output=True)
        paths = {"safetensors": single, "index": index, "orbax": orbax_dir}
        for p in [single, *index.parent.iterdir(), *orbax_dir.rglob("*")]:
            if p.is_file():
                p.read_bytes()  # into the page cache: every variant reads from memory

        def once(fmt, mode, check=True):
            cmd = [PYTHON, me, "--child", fmt, mode, str(paths[fmt]), str(shapes[fmt])]
            peak, out = peak_anon(cmd + (["--check"] if check else []))
            lines = out.splitlines()
            f = next(line for line in lines if line.startswith("BEFORE")).split()
            val = {k: float(f[f.index(k) + 1]) for k in
                   ("BEFORE", "ANON", "MAXRSS", "HELD", "SECONDS", "CPU")}
            val["PEAK_ANON"] = peak
            val["SUMS"] = json.loads(next(line for line in lines
                                          if line.startswith("SUMS "))[5:])
            return val

        runs: dict = {(fmt, m): [] for fmt, modes in MODES.items() for m in modes}
        for _ in range(RUNS[a.size]):  # interleaved: one run of each format and mode in turn
            for fmt, mode in runs:
                runs[fmt, mode].append(once(fmt, mode))
        busy: dict = {}
        if full and CASE == "large":
            busy = {(fmt, m): [] for fmt in MODES for m in ("planc", *BASELINES[fmt])}
            hogs = hog()
            try:
                for _ in range(BUSY_RUNS):
                    for fmt, mode in busy:
                        busy[fmt, mode].append(once(fmt, mode, check=False))
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()

    # The answers first: every mode of every format built the same arrays (from Orbax,
    # of the "many" case, those of its first tensors).
    reference = runs["safetensors", "planc"][0]["SUMS"]
    for (fmt, mode), found in runs.items():
        want = orbax_names if fmt == "orbax" and orbax_names else list(reference)
        for r in found:
            if sorted(r["SUMS"]) != sorted(want) or any(r["SUMS"][k] != reference[k]
                                                        for k in want):
                wrong = sorted(k for k in want if r["SUMS"].get(k) != reference[k])
                raise SystemExit(f"{fmt} {mode} built different arrays: {wrong[:5]}")
    placed_by = {fmt: int(runs[fmt, "planc"][0]["HELD"]) for fmt in MODES}
    placed = placed_by["safetensors"]
    orbax_part = (f" (Orbax: the first {ORBAX_TENSORS[a.size]:,} of them, "
                  f"{gib(placed_by['orbax'])} placed)" if CASE == "many" else "")
    results.row("checkpoint (float32)", f"{gib(nbytes)} in {len(reference):,} tensors, as one "
                f"safetensors file, a {INDEX_FILES}-file index and an Orbax directory"
                + orbax_part, checkpoint_bytes=nbytes)
    results.row("bytes the plan places on the 8 devices (every shard summed)", gib(placed),
                placed_bytes=placed)
    results.row("answers", f"every mode of every format built the same arrays (CRC-32 of "
                f"each device's shard of each of the {len(reference)} variables, every run)")

    def med(fmt, mode, key):
        return statistics.median(r[key] for r in runs[fmt, mode])

    def anon(fmt, mode):  # anonymous memory the call adds, over the placed bytes
        return statistics.median((r["PEAK_ANON"] - r["ANON"]) / placed_by[fmt]
                                 for r in runs[fmt, mode])

    def rss_cost(fmt, mode):
        return statistics.median((r["MAXRSS"] - r["BEFORE"]) / placed_by[fmt]
                                 for r in runs[fmt, mode])

    def ratio(key, fmt, mode, found=runs):
        r = sorted(p[key] / b[key] for p, b in zip(found[fmt, "planc"], found[fmt, mode]))
        return statistics.median(r), r[0], r[-1]

    def verdict(ok):
        return ("pass" if ok else "MISS") if full else "n/a (tiny)"

    worst_anon = worst_cpu = 0.0
    for fmt, modes in MODES.items():
        for mode in modes:
            results.row(f"{FORMATS[fmt]}: {NAMES[mode]}",
                        f"anonymous memory **{anon(fmt, mode):.2f}x** the placed bytes (RSS "
                        f"with file pages {rss_cost(fmt, mode):.2f}x); {med(fmt, mode, 'CPU'):.2f}"
                        f" s CPU, {med(fmt, mode, 'SECONDS'):.2f} s wall",
                        anon=anon(fmt, mode), rss=rss_cost(fmt, mode),
                        cpu_seconds=med(fmt, mode, "CPU"), seconds=med(fmt, mode, "SECONDS"))
        best = min(BASELINES[fmt], key=lambda m: med(fmt, m, "CPU"))
        cpu = ratio("CPU", fmt, best)
        results.row(f"{FORMATS[fmt]}: plan.load CPU / the best baseline's ({NAMES[best]})",
                    f"{cpu[0]:.2f}x (per-run ratios {cpu[1]:.2f}-{cpu[2]:.2f})", "<= 1.0x",
                    verdict(cpu[0] <= 1.0), ratio=cpu[0])
        worst_cpu = max(worst_cpu, cpu[0])
        mine = anon(fmt, "planc")
        worst_anon = max(worst_anon, mine)
        theirs = min(anon(fmt, m) for m in BASELINES[fmt])
        goal = MANY_ANON_BEFORE[fmt] if CASE == "many" else 1.05
        results.row(f"{FORMATS[fmt]}: plan.load anonymous memory / placed bytes",
                    f"{mine:.2f}x (the best baseline's {theirs:.2f}x)",
                    f"<= {goal:.2f}x" + (" (before this round)" if CASE == "many" else ""),
                    verdict(mine <= goal), ratio=mine)
        if busy:
            walls = {m: ratio("SECONDS", fmt, m, busy) for m in BASELINES[fmt]}
            best_wall = min(walls, key=lambda m: statistics.median(
                r["SECONDS"] for r in busy[fmt, m]))
            w = walls[best_wall]
            results.row(f"{FORMATS[fmt]}, busy machine (a CPU hog per core): plan.load wall "
                        f"/ the best baseline's ({NAMES[best_wall]})",
                        f"{w[0]:.2f}x (per-run ratios {w[1]:.2f}-{w[2]:.2f}; plan.load "
                        f"{statistics.median(r['SECONDS'] for r in busy[fmt, 'planc']):.2f} s)",
                        "<= 1.1x", verdict(w[0] <= 1.1), ratio=w[0])
    if full:
        floor = ratio("CPU", "safetensors", "read")
        results.row("one safetensors file: plan.load CPU / `load_file` alone (the read floor)",
                    f"{floor[0]:.2f}x (per-run ratios {floor[1]:.2f}-{floor[2]:.2f})",
                    ratio=floor[0])
    results.note("each variant runs in a fresh process, the formats and modes interleaved "
                 "run by run. Memory is what the call adds to the process's anonymous memory "
                 "(RssAnon, sampled every millisecond from /proc/PID/status by the parent: "
                 "the kernel keeps no high-water mark of it), over the bytes placed; "
                 "ru_maxrss also counts file-backed pages (the page cache mapped in), which "
                 "is why `load_file` shows ~2x there and ~1x in anonymous memory. Times are "
                 f"the call alone, CPU of the process (all its threads), medians of "
                 f"{RUNS[a.size]} runs, the files in the page cache; ratios are medians of "
                 "per-run ratios. " + (f"The busy rows are wall times of {BUSY_RUNS} "
                 "interleaved runs beside a `while True: pass` process per core. " if busy
                 else "") + "Every child imports "
                 "jax, planc and safetensors (and Orbax for the Orbax rows) and calls "
                 "`plan.shardings` before its timer, so the same imports are warm on both "
                 "sides; `plan.load` computes its shardings again, and imports its "
                 "checkpoint readers, inside its timed call.")
    if CASE == "many":
        results.ratio("load_many_cpu", worst_cpu, "(plan.load CPU / the best baseline's, "
                      "the worst of the three formats)", a.json)
    else:
        results.ratio("load_checkpoint_peak", worst_anon,
                      "(plan.load anonymous memory above the runtime / bytes placed, the "
                      "worst of the three formats)", a.json)


if __name__ == "__main__":
    main()

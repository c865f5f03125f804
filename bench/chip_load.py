"""Benchmark 18: loading a checkpoint into a TPU chip's memory, `plan.load` against
the floor (`jax.device_put` of the same tensors resident in host memory), Orbax's own
restore and the careful `get_slice` loop, in GB/s, and the host memory each load adds.

A checkpoint of several GiB (float32 layers, `SIZES`) as one safetensors file and as an
Orbax directory (`StandardCheckpointer`), its files read once beforehand so every mode
reads from the page cache. Each mode runs in a fresh process, the modes interleaved run
by run: the wall time from the call to `jax.block_until_ready` of what it returned.

- the floor: `jax.device_put(tensors, shardings)` of the tensors already in host memory
  (read by `load_file` before the timer): what the link to the chip can do;
- safetensors: `plan.load(file)` against the loop a careful user writes (`get_slice`
  inside `jax.make_array_from_callback`, `load_checkpoint.user_loop`);
- Orbax: `plan.load(dir)` against Orbax's restore with the target shardings
  (`ocp.load(dir, abstract)`).

Host memory is what the call adds to the process's resident set, sampled from
/proc/self/statm every millisecond by a thread of the child during the call (peak minus
the value just before it), not `ru_maxrss`: the TPU runtime's start-up holds GBs in the
lifetime peak. Every mode's arrays are checksummed (each device's shard, CRC-32) and
compared with the floor's before a figure is reported. The goals (issue 61): `plan.load`
at least half the floor's GB/s, never slower than the baseline of its format (wall-time
ratio at most 1.0x, the median of per-run ratios), and under a quarter of the checkpoint
in added host memory.

With the chip attached (`PLANC_CHIP=1`, on a TPU VM) the arrays go to its memory (the
checkpoint is `SIZES["chip"]`, 4 GiB). Without it they go to this machine's 8 simulated
CPU devices (2 GiB at `--size full`), and the figures say so: they are host copies, not
a chip's, and the goals are not judged (there the placed arrays are host memory too, and
`plan.load` takes the host path, as on any CPU; `PLANC_LOAD_STAGING=always` in the
environment rehearses the staged path the chip takes).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
if os.environ.get("PLANC_CHIP") == "1":
    # On the chip: JAX finds its platform (`common` would otherwise choose the CPU).
    os.environ.setdefault("JAX_PLATFORMS", "")

from common import ENV, PYTHON, Results, args  # noqa: E402

# (layers, width): each layer a (width, 4 width) and a (4 width, width) float32 matrix.
# 16 MiB, 2 GiB, and on the chip 4 GiB (a quarter of its memory).
SIZES = {"tiny": (2, 512), "full": (4, 4096), "chip": (8, 4096)}
RUNS = {"tiny": 1, "full": 3, "chip": 3}
# format -> (planc's mode, the baseline); "resident" is the floor, read before the timer.
MODES = {"resident": ("floor",), "safetensors": ("planc", "user"), "orbax": ("planc", "orbax")}
NAMES = {"planc": "`plan.load(path)`", "user": "the careful `get_slice` loop",
         "orbax": "Orbax's restore with target shardings (`ocp.load(path, abstract)`)",
         "floor": "the floor: `jax.device_put` of the tensors resident in host memory"}
FLOOR_SHARE = 0.5   # plan.load's GB/s over the floor's, at least
MEMORY_SHARE = 0.25  # the host memory a load adds over the checkpoint's bytes, under


class Resident(threading.Thread):
    """The peak of this process's resident set (/proc/self/statm) while it runs."""

    def __init__(self):
        super().__init__(daemon=True)
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.before = self.peak = self.now()
        self.done = threading.Event()

    def now(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def run(self):
        while not self.done.wait(0.001):
            self.peak = max(self.peak, self.now())

    def added(self) -> int:
        self.done.set()
        self.join()
        return max(self.peak, self.now()) - self.before

# Split over every device where there are several (a chip lent alone has one).
PLAN = r"""
plan chip_load
mesh(fsdp = auto)
model_parallel(batch = fsdp)
layout {
    "layers\.\d+\.(up|down)" -> (fsdp, _)
}
"""


def tensors(size: str) -> dict:
    import numpy as np

    layers, width = SIZES[size]
    rng = np.random.default_rng(0)
    out = {}
    for i in range(layers):
        out[f"layers.{i}.up"] = rng.standard_normal((width, 4 * width), dtype=np.float32)
        out[f"layers.{i}.down"] = rng.standard_normal((4 * width, width), dtype=np.float32)
    return out


def write(size: str, directory: Path) -> tuple[Path, Path, int]:
    """(safetensors file, Orbax directory, bytes) of the checkpoint, written in a child
    (the Orbax save needs the devices)."""
    import safetensors.numpy

    single = directory / "model.safetensors"
    ts = tensors(size)
    safetensors.numpy.save_file(ts, str(single))
    nbytes = sum(a.nbytes for a in ts.values())
    del ts
    orbax_dir = directory / "orbax"
    import subprocess

    subprocess.run([PYTHON, __file__, "--write-orbax", str(single), str(orbax_dir)],
                   env=ENV, check=True, capture_output=True)
    return single, orbax_dir, nbytes


def child(fmt: str, mode: str, path: str, shapes_from: str) -> None:
    """One mode's load, timed, its host memory sampled; prints its seconds, the memory
    it added and every shard's checksum."""
    import jax
    from safetensors import safe_open

    import planc
    from load_checkpoint import checksums, user_loop

    plan = planc.loads(PLAN)
    mesh = plan.mesh()
    with safe_open(shapes_from, framework="numpy") as f:
        shapes = {k: jax.ShapeDtypeStruct(tuple(f.get_slice(k).get_shape()), "float32")
                  for k in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
    placement = plan.shardings(shapes, mesh)
    if mode == "orbax":
        import orbax.checkpoint.experimental.v1 as ocp

        abstract = {k: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=placement[k])
                    for k, s in shapes.items()}
    elif fmt == "orbax":
        import orbax.checkpoint.experimental.v1  # noqa: F401  (imported for both sides)
    if mode == "floor":
        import safetensors.numpy

        resident = safetensors.numpy.load_file(path)  # in host memory before the timer
    sampler = Resident()
    sampler.start()
    t = time.perf_counter()
    if mode == "planc":
        out = plan.load(path)
    elif mode == "user":
        out = user_loop(path, placement)
    elif mode == "floor":
        out = jax.device_put(resident, placement)
    else:
        out = ocp.load(path, abstract)
    jax.block_until_ready(out)
    seconds = time.perf_counter() - t
    added = sampler.added()
    _, sums = checksums(out, placement)
    platform = jax.devices()[0].platform
    print("RESULT " + json.dumps({"seconds": seconds, "added": added, "sums": sums,
                                  "platform": platform, "kind": jax.devices()[0].device_kind,
                                  "devices": len(jax.devices()), "jax": jax.__version__}))


def main():
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        child(*sys.argv[i + 1:i + 5])
        return
    if "--write-orbax" in sys.argv:
        from load_checkpoint import write_orbax

        i = sys.argv.index("--write-orbax")
        write_orbax(sys.argv[i + 1], sys.argv[i + 2], PLAN)
        return
    import subprocess

    a = args(__doc__.splitlines()[0])
    size = "chip" if os.environ.get("PLANC_CHIP") == "1" else a.size
    results = Results("chip_load", "Loading a checkpoint into a chip's memory", a.size)
    with tempfile.TemporaryDirectory() as tmp:
        single, orbax_dir, nbytes = write(size, Path(tmp))
        paths = {"resident": single, "safetensors": single, "orbax": orbax_dir}
        for p in [single, *orbax_dir.rglob("*")]:
            if p.is_file():
                p.read_bytes()  # into the page cache

        def once(fmt, mode):
            proc = subprocess.run([PYTHON, __file__, "--child", fmt, mode, str(paths[fmt]),
                                   str(single)], env=ENV, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"{fmt} {mode} failed: {proc.stderr[-2000:]}")
            line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
            found = json.loads(line[len("RESULT "):])
            # each run's figures as they come: a run cut short still shows what it measured
            print(f"  {fmt} {mode}: {nbytes / found['seconds'] / 1e9:.2f} GB/s, "
                  f"+{found['added'] / 2**20:.0f} MiB", flush=True)
            return found

        runs = {(f, m): [] for f, modes in MODES.items() for m in modes}
        # PLANC_CHIP_LOAD_RUNS: fewer rounds where the chip's time is short (one round
        # gives no spread; the notes say how many ran)
        for _ in range(int(os.environ.get("PLANC_CHIP_LOAD_RUNS", RUNS[size]))):
            for fmt, modes in MODES.items():
                for mode in modes:
                    runs[fmt, mode].append(once(fmt, mode))
    first = runs["resident", "floor"][0]
    for key, found in runs.items():
        for r in found:
            if r["sums"] != first["sums"]:
                raise SystemExit(f"{key} placed other values than the floor's device_put")
    chip = first["platform"] == "tpu"
    where = (f"{first['kind']} x {first['devices']}" if chip else
             f"{first['devices']} simulated CPU devices (no chip attached: host copies, "
             "not a chip's; the goals are not judged)")
    results.note(f"{where}, JAX {first['jax']}, {time.strftime('%Y-%m-%d')}; "
                 f"{nbytes / 2**30:.2f} GiB in {len(first['sums'])} tensors, float32")

    def verdict(ok):
        return ("pass" if ok else "MISS") if chip else "n/a (no chip)"

    def seconds(fmt, mode):
        return statistics.median(r["seconds"] for r in runs[fmt, mode])

    def per_run(mine, theirs):  # sorted ratios of the runs' wall times, run by run
        return sorted(a["seconds"] / b["seconds"] for a, b in zip(mine, theirs))

    floor = runs["resident", "floor"]
    s = seconds("resident", "floor")
    results.row(NAMES["floor"], f"{nbytes / s / 1e9:.2f} GB/s ({s:.2f} s wall)",
                seconds=s, gbps=nbytes / s / 1e9)
    worst = 0.0
    for fmt in ("safetensors", "orbax"):
        mine, theirs = MODES[fmt]
        for mode in (mine, theirs):
            s = seconds(fmt, mode)
            added = statistics.median(r["added"] for r in runs[fmt, mode])
            results.row(f"{fmt}: {NAMES[mode]}",
                        f"{nbytes / s / 1e9:.2f} GB/s ({s:.2f} s wall); host memory added "
                        f"{added / 2**30:.2f} GiB", seconds=s, gbps=nbytes / s / 1e9,
                        added_bytes=added)
        share = statistics.median(1 / r for r in per_run(runs[fmt, mine], floor))
        results.row(f"{fmt}: plan.load GB/s / the floor's", f"{share:.0%}",
                    f">= {FLOOR_SHARE:.0%}", verdict(share >= FLOOR_SHARE), share=share)
        ratios = per_run(runs[fmt, mine], runs[fmt, theirs])
        r = statistics.median(ratios)
        worst = max(worst, r)
        results.row(f"{fmt}: plan.load wall / {NAMES[theirs]}'s",
                    f"{r:.2f}x (per-run {ratios[0]:.2f}-{ratios[-1]:.2f})", "<= 1.0x",
                    verdict(r <= 1.0), ratio=r, per_run=ratios)
        added = statistics.median(r["added"] for r in runs[fmt, mine]) / nbytes
        results.row(f"{fmt}: host memory plan.load adds / the checkpoint's bytes",
                    f"{added:.2f}x", f"< {MEMORY_SHARE:.2f}x", verdict(added < MEMORY_SHARE),
                    ratio=added)
    rounds = len(runs["resident", "floor"])
    results.note(f"{rounds} round(s); each mode runs in a fresh process, the modes interleaved run by run, the "
                 "files in the page cache; wall times are medians, ratios medians of per-run "
                 "ratios. Host memory added: the peak of the resident set (/proc/self/statm, "
                 "sampled every millisecond by a thread of the child during the call) over "
                 "its value just before the call.")
    results.ratio("chip_load", worst, "(plan.load wall time / the baseline's, the worse "
                  "format)", a.json)


if __name__ == "__main__":
    main()

"""Benchmark: a keras-hub preset onto 8 simulated CPU devices, `plan.from_preset` against
keras-hub's own `from_preset` under the same `ModelParallel` (the plan's).

A Gemma backbone (about 0.6 GiB of float32 in the full size) is saved once with
keras-hub's `save_to_preset`. Each load then runs in a fresh process (`--child`):

- `plan.from_preset(GemmaBackbone, preset)`: variables created without values, each
  device's slice read from `model.weights.h5` into its shard;
- `with plan.activate(): GemmaBackbone.from_preset(preset)`: keras-hub's path, each
  variable initialised in its layout, then `load_weights` reading every tensor whole.

First one run of each writes a digest of every variable's values, and the two must be
equal (the answers are compared before anything is timed). Then the two alternate,
`RUNS` times each. A child's peak is its anonymous memory (`RssAnon`, the heap and the
device buffers, not the file's pages in the page cache), sampled every millisecond
while the call runs, minus its `RssAnon` just before it (imports, devices); it is set
against the bytes the plan places on the devices (every shard summed: on a CPU they all
live in host memory). Times are the call's CPU seconds, and the figure is the median of
the per-run ratios planc / keras-hub.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import anon_kb  # noqa: E402

PLAN = r"""
plan preset_load
mesh(batch = 4, model = 2)
model_parallel(batch = batch)
layout {
    "token_embedding/embeddings"                         -> (model, batch)
    "decoder_block.*attention.*(query|key|value).kernel" -> (model, batch, _)
    "decoder_block.*attention_output.kernel"             -> (model, _, batch)
    "decoder_block.*ffw_gating(_2)?.kernel"              -> (batch, model)
    "decoder_block.*ffw_linear.kernel"                   -> (model, batch)
    default                                              -> replicated
}
"""

# GemmaBackbone arguments: the full size is 0.63 GiB of float32 weights.
SIZES = {
    "tiny": dict(vocabulary_size=4096, num_layers=2, num_query_heads=4,
                 num_key_value_heads=4, hidden_dim=256, intermediate_dim=1024, head_dim=64),
    "full": dict(vocabulary_size=32768, num_layers=8, num_query_heads=8,
                 num_key_value_heads=8, hidden_dim=1024, intermediate_dim=8192,
                 head_dim=128),
}
RUNS = {"tiny": 1, "full": 3}


def save(size: str, directory: str) -> None:
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    keras_hub.models.GemmaBackbone(**SIZES[size]).save_to_preset(directory)


class PeakAnon:
    """The largest `RssAnon` of this process seen while the block runs (sampled by a
    thread every millisecond; the sampler wakes while the loaders release the GIL)."""

    def __enter__(self):
        import threading

        self.peak, self._stop = anon(), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, anon())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, anon())


def anon() -> int:
    """This process's anonymous resident memory in bytes (`common.anon_kb`)."""
    return anon_kb() * 1024


def child(mode: str, preset: str, check: bool) -> None:
    import gc
    import hashlib
    import time

    import jax
    import keras_hub
    import numpy as np

    import planc

    if len(jax.devices()) != 8:
        raise SystemExit(f"needs 8 devices, found {len(jax.devices())}")
    plan = planc.loads(PLAN)
    plan.device_mesh  # the mesh and the distribution's objects, outside the figures
    cls = keras_hub.models.GemmaBackbone
    gc.collect()
    before = anon()
    t, c = time.perf_counter(), time.process_time()
    with PeakAnon() as peak:
        if mode == "planc":
            model = plan.from_preset(cls, preset)
        else:
            with plan.activate():
                model = cls.from_preset(preset)
        jax.block_until_ready([v.value for v in model.variables])
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    held = sum(s.data.nbytes for v in model.variables for s in v.value.addressable_shards)
    specs = sorted((v.path, str(v.value.sharding.spec)) for v in model.variables)
    digest = "-"
    if check:  # after the figures: gathering every value costs memory of its own
        h = hashlib.sha256(repr(specs).encode())
        for v in model.variables:
            h.update(np.asarray(v.value).tobytes())
        digest = h.hexdigest()
    print(f"BEFORE {before} PEAK {peak.peak} HELD {held} SECONDS {dt} CPU {cpu} "
          f"DIGEST {digest}")


def run_child(mode: str, preset: str, check: bool) -> dict:
    import subprocess

    from common import ENV, PYTHON, ROOT

    cmd = [PYTHON, str(Path(__file__).resolve()), "--child", mode, preset]
    proc = subprocess.run(cmd + (["--check"] if check else []), cwd=ROOT, env=ENV,
                          capture_output=True, text=True)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("BEFORE ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} failed: {proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    f = lines[-1].split()
    return {"before": int(f[1]), "peak": int(f[3]), "held": int(f[5]),
            "seconds": float(f[7]), "cpu": float(f[9]), "digest": f[11]}


def main():
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        if sys.argv[i + 1] == "save":
            save(sys.argv[i + 2], sys.argv[i + 3])
        else:
            child(sys.argv[i + 1], sys.argv[i + 2], "--check" in sys.argv)
        return
    import subprocess
    import tempfile

    from common import ENV, PYTHON, ROOT, Results, args, gib, status

    a = args(__doc__.splitlines()[0])
    results = Results("preset_load", "A keras-hub preset onto the plan's shards: peak host "
                      "memory and time", a.size)
    with tempfile.TemporaryDirectory() as tmp:
        preset = str(Path(tmp) / "gemma")
        subprocess.run([PYTHON, str(Path(__file__).resolve()), "--child", "save", a.size,
                        preset], cwd=ROOT, env=ENV, check=True, capture_output=True)
        weights = Path(preset) / "model.weights.h5"
        nbytes = weights.stat().st_size
        weights.read_bytes()  # into the page cache: both read it from memory
        results.row("preset (keras-hub save_to_preset, float32)", gib(nbytes),
                    preset_bytes=nbytes)
        checked = {mode: run_child(mode, preset, True) for mode in ("planc", "keras_hub")}
        if checked["planc"]["digest"] != checked["keras_hub"]["digest"]:
            raise SystemExit("plan.from_preset and keras-hub's from_preset disagree on the "
                             "values or layouts: nothing timed")
        runs = {"planc": [], "keras_hub": []}
        for _ in range(RUNS[a.size]):
            for mode in runs:
                runs[mode].append(run_child(mode, preset, False))
    placed = runs["planc"][0]["held"]
    results.row("values and layouts of both loads", "equal (sha256 of every variable)")
    results.row("bytes the plan places on the 8 devices (every shard summed)", gib(placed),
                placed_bytes=placed)
    cost = {m: [(r["peak"] - r["before"]) / r["held"] for r in rs] for m, rs in runs.items()}
    names = {"planc": "`plan.from_preset`",
             "keras_hub": "keras-hub `from_preset` under `plan.activate()`"}
    for mode, rs in runs.items():
        results.row(f"{names[mode]}: peak RssAnon above the runtime",
                    f"**{statistics.median(cost[mode]):.2f}x** the placed bytes; "
                    f"{statistics.median(r['cpu'] for r in rs):.2f} s CPU, "
                    f"{statistics.median(r['seconds'] for r in rs):.2f} s wall",
                    ratio=statistics.median(cost[mode]), runs=rs)
    full = a.size == "full"
    mine = statistics.median(cost["planc"])
    results.row("plan.from_preset: peak above the runtime / placed bytes", f"{mine:.2f}x",
                "<= 1.1x", status(mine <= 1.1) if full else "n/a (tiny)")
    cpu = statistics.median(p["cpu"] / k["cpu"] for p, k in zip(runs["planc"],
                                                                 runs["keras_hub"]))
    wall = statistics.median(p["seconds"] / k["seconds"] for p, k in zip(runs["planc"],
                                                                         runs["keras_hub"]))
    results.row("plan.from_preset CPU / keras-hub's (median of per-run ratios)",
                f"{cpu:.2f}x", "<= 1.0x", status(cpu <= 1.0) if full else "n/a (tiny)")
    results.row("plan.from_preset wall / keras-hub's (median of per-run ratios)",
                f"{wall:.2f}x", "", "")
    results.note("each load runs in a fresh process, the two alternating; the preset's "
                 "file is in the page cache. keras-hub's peak is the one users meet as an "
                 "out-of-memory error: each variable's initial value, then each tensor read "
                 "whole before Keras lays it out.")
    results.ratio("preset_load_peak", mine,
                  "(plan.from_preset peak RssAnon above the runtime / bytes placed)", a.json)


if __name__ == "__main__":
    main()

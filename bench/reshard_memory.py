"""Benchmark: `planc reshard` memory is bounded by a part, not by the checkpoint.

Two safetensors checkpoints (N and 2N tensors of 32 MiB float32; `--size tiny`: 1 MiB
tensors) are resharded onto 8 simulated CPU devices, each run in a fresh process whose
peak RSS is the wrapper's ``RUSAGE_CHILDREN.ru_maxrss``:

- `planc reshard SRC -o DST --plan PLAN` from the safetensors file, then from the Orbax
  checkpoint that wrote (Orbax -> Orbax);
- the baseline, measured in the same run: `load_file`, `plan.shard`, Orbax `save` of the
  whole tree (what one writes without partial saves).

The ratio is reshard's peak over the baseline's at 2N tensors; `growth` is reshard's
peak at 2N over its peak at N (1.0: the model's size does not matter).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, Results, args, peak_memory, status  # noqa: E402

PLAN = """
plan reshard_bench
mesh(data = 8)
model_parallel(batch = data)
layout { "layers/.*/kernel" -> (data, _) }
"""
SHAPES = {"tiny": (512, 512), "full": (4096, 2048)}   # 1 MiB / 32 MiB float32 tensors
COUNTS = {"tiny": 8, "full": 16}

WRITE = """
import sys, numpy as np
from safetensors.numpy import save_file
rows, cols, n = map(int, sys.argv[2:5])
rng = np.random.default_rng(0)
save_file({f"layers/{i}/kernel": rng.standard_normal((rows, cols), dtype=np.float32)
           for i in range(n)}, sys.argv[1])
"""
WHOLE = """
import os, sys
import orbax.checkpoint.experimental.v1 as ocp, planc
from safetensors.numpy import load_file
plan = planc.load_plan(sys.argv[2])
placed = plan.shard(load_file(sys.argv[1]))
ocp.save(os.path.abspath(sys.argv[3]), placed)
"""


def mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


def main() -> None:
    opts = args(__doc__.splitlines()[0])
    results = Results("reshard_memory", "planc reshard peak memory", opts.size)
    rows, cols = SHAPES[opts.size]
    work = Path(tempfile.mkdtemp(prefix="planc-reshard-bench-"))
    try:
        plan = work / "plan.kd"
        plan.write_text(PLAN)
        peaks = {}
        for n in (COUNTS[opts.size], 2 * COUNTS[opts.size]):
            src = work / f"m{n}.safetensors"
            subprocess.run([PYTHON, "-c", WRITE, str(src), str(rows), str(cols), str(n)],
                           check=True)
            size = src.stat().st_size
            cli = [PYTHON, "-m", "planc", "reshard"]
            st, _, _ = peak_memory(cli + [str(src), "-o", str(work / f"o{n}"), "--plan", str(plan)])
            oo, _, _ = peak_memory(cli + [str(work / f"o{n}"), "-o", str(work / f"oo{n}"),
                                          "--plan", str(plan)])
            whole, _, _ = peak_memory([PYTHON, "-c", WHOLE, str(src), str(plan),
                                       str(work / f"w{n}")])
            peaks[n] = (st, oo, whole)
            results.row(f"{mib(size)} checkpoint: reshard safetensors -> Orbax", mib(st))
            results.row(f"{mib(size)} checkpoint: reshard Orbax -> Orbax", mib(oo))
            results.row(f"{mib(size)} checkpoint: load_file + shard + Orbax save", mib(whole))
        small, large = sorted(peaks)
        growth = max(peaks[large][:2]) / max(peaks[small][:2])
        results.row("reshard peak at 2N tensors / at N", f"{growth:.2f}", "<= 1.2",
                    status(growth <= 1.2))
        ratio = max(peaks[large][:2]) / peaks[large][2]
        results.ratio("reshard_over_whole", ratio,
                      "reshard peak RSS / whole-tree save peak RSS (2N tensors)", opts.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""The compiled programs of benchmark 17's and 19's steps, for the cost model's fit.

The step times measured on the chip (`../shared/chip/2026-12-07/`, benchmarks 17 and 19)
are explained op by op from the program XLA compiled for them. That program is the same
whether it is compiled on the chip or compile-only through libtpu on a CPU host, at the
same JAX and libtpu: this script compiles each step for compile-only `v5e:1x1` and keeps
its optimized HLO, gzipped, beside the measured times, so the fit re-runs anywhere:

    python bench/chip_programs.py bench/chip_data/2026-12-07

(one TPU compile per step: 30-50 s each on a small CPU host).
"""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main(argv):
    out = Path(argv[0]) / "hlo"
    only = set(argv[1:])
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    import chip_search
    import chip_steps
    import planc

    plan = planc.loads(chip_steps.PLAN, file="chip.kd")
    builders = {name: (lambda n=name: chip_steps.build(n)) for name in chip_steps.NAMES}
    builders["search_remat"] = chip_search.remat
    out.mkdir(parents=True, exist_ok=True)
    for name, build in builders.items():
        if only and name not in only:
            continue
        report = plan.aot(*build(), topology="v5e:1x1")
        path = out / f"{name}.hlo.gz"
        # mtime=0: the same program gives the same bytes.
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            f.write(report.program.hlo.encode())
        print(f"{name}: peak {report.peak / 2**30:.2f} GiB -> {path}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

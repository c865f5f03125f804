"""Benchmark: `planc explain` of Llama-3-405B shapes, against `planc lint` of the same plan and model.

The model is the manifest of benchmark 5 (`bench/models.py`, written by
`validate_405b.write_manifest`), the plan `bench/llama3_405b.kd`. Both commands run as
fresh subprocesses with their output piped (the plain-text table), alternated run by run
so load on the shared machine hits both alike; the ratio is of median wall times.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, Results, Timing, args, command_time, status  # noqa: E402
from validate_405b import PLAN, write_manifest  # noqa: E402

TARGET = 1.5


def main():
    a = args(__doc__.splitlines()[0])
    results = Results("explain_405b", "planc explain vs planc lint: Llama-3-405B", a.size)
    script = Path(PYTHON).parent / "planc"
    head = [str(script)] if script.exists() else [PYTHON, "-m", "planc"]
    runs = 1 if a.size == "tiny" else 7
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "llama3_405b.json"
        count, _ = write_manifest(manifest, a.size == "tiny")
        explain = head + ["explain", str(PLAN), "--model", str(manifest), "--devices", "512"]
        lint = head + ["lint", str(PLAN), "--model", str(manifest), "--devices", "512"]
        command_time(explain, runs=1, warmup=0)  # warm-up: file and bytecode caches
        command_time(lint, runs=1, warmup=0)
        explain_runs, lint_runs = [], []
        for _ in range(runs):
            explain_runs.append(command_time(explain, runs=1, warmup=0))
            lint_runs.append(command_time(lint, runs=1, warmup=0))
    ex = Timing([t.cpu for t in explain_runs], [t.wall for t in explain_runs])
    li = Timing([t.cpu for t in lint_runs], [t.wall for t in lint_runs])
    ratio = ex.wall / li.wall
    results.row("model", f"{count:,} variables", variables=count)
    results.row("`planc explain PLAN --model <manifest> --devices 512` (piped)",
                f"{ex.wall * 1e3:.0f} ms wall, {ex.cpu * 1e3:.0f} ms CPU",
                wall_s=ex.wall, cpu_s=ex.cpu, runs=runs)
    results.row("baseline: `planc lint PLAN --model <manifest> --devices 512`",
                f"{li.wall * 1e3:.0f} ms wall, {li.cpu * 1e3:.0f} ms CPU",
                wall_s=li.wall, cpu_s=li.cpu)
    results.row("explain / lint (wall time)", f"{ratio:.2f}x", f"<= {TARGET}x",
                status(ratio <= TARGET), ratio=ratio)
    results.ratio("explain_over_lint", ratio, "(planc explain wall time / planc lint wall time)",
                  a.json)


if __name__ == "__main__":
    main()

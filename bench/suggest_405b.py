"""Benchmark 6: `planc suggest` for Llama-3-405B shapes at 512 devices, against `planc lint
--strict` of the plan it writes, both as fresh processes in the same run.

The model is the manifest of benchmark 5 (`bench/models.py`: 1,137 variables, 812 GB in
bfloat16). The target is under 2 s of wall time for the suggestion; the ratio is the
suggestion's wall time over the lint's, which reads the same manifest and resolves the
same variables (a suggestion validates its own plan once, so it cannot cost less).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, Results, args, command_time, status  # noqa: E402
from validate_405b import write_manifest  # noqa: E402


def main():
    a = args(__doc__.splitlines()[0])
    results = Results("suggest_405b", "planc suggest: Llama-3-405B at 512 devices", a.size)
    script = Path(PYTHON).parent / "planc"
    head = [str(script)] if script.exists() else [PYTHON, "-m", "planc"]
    runs = 2 if a.size == "tiny" else 5
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "llama3_405b.json"
        count, nbytes = write_manifest(manifest, a.size == "tiny")
        plan = Path(tmp) / "llama3_405b_suggested.kd"
        suggest = head + ["suggest", "--model", str(manifest), "--devices", "512",
                          "--state", "3", "-o", str(plan)]
        timing = command_time(suggest, runs=runs, warmup=1)
        lint = head + ["lint", "--strict", str(plan), "--model", str(manifest),
                       "--devices", "512"]
        baseline = command_time(lint, runs=runs, warmup=1)
        rules = sum(1 for line in plan.read_text().splitlines() if "->" in line)
        header = [line for line in plan.read_text().splitlines() if line.startswith("# ")]
    results.row("model", f"{count:,} variables, {nbytes / 1e9:,.0f} GB in bfloat16",
                variables=count, model_bytes=nbytes)
    results.row("`planc suggest --model <manifest> --devices 512 --state 3`",
                f"{timing.wall:.2f} s wall, {timing.cpu:.2f} s CPU; {rules} rules",
                "< 2 s", status(timing.wall < 2.0), wall_s=timing.wall, cpu_s=timing.cpu)
    results.row("baseline: `planc lint --strict` of the suggested plan",
                f"{baseline.wall:.2f} s wall, {baseline.cpu:.2f} s CPU",
                wall_s=baseline.wall, cpu_s=baseline.cpu)
    for line in header[1:4]:
        results.note(line[2:])
    results.ratio("suggest_over_lint", timing.wall / baseline.wall,
                  "(wall time of the suggestion / of linting it)", a.json)


if __name__ == "__main__":
    main()

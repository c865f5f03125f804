"""Benchmark: `planc explain` of Llama-3-405B shapes, against `planc lint` of the same plan and model.

The model is the manifest of benchmark 5 (`bench/models.py`, written by
`validate_405b.write_manifest`), the plan `bench/llama3_405b.kd`. Both commands run as
fresh subprocesses with their output piped (the plain-text table), alternated run by run
so load on the shared machine hits both alike; the ratio is the median of the
per-pair ratios of CPU time (wall time moves with the load of this shared machine).
"""

from __future__ import annotations

import statistics
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
    per_pair = sorted(e.cpu / li_.cpu for e, li_ in zip(explain_runs, lint_runs))
    ratio = statistics.median(per_pair)
    results.row("model", f"{count:,} variables", variables=count)
    results.row("`planc explain PLAN --model <manifest> --devices 512` (piped)",
                f"{ex.cpu * 1e3:.0f} ms CPU, {ex.wall * 1e3:.0f} ms wall",
                wall_s=ex.wall, cpu_s=ex.cpu, runs=runs)
    results.row("baseline: `planc lint PLAN --model <manifest> --devices 512`",
                f"{li.cpu * 1e3:.0f} ms CPU, {li.wall * 1e3:.0f} ms wall",
                wall_s=li.wall, cpu_s=li.cpu)
    results.row("explain / lint (CPU time, median of per-pair ratios)",
                f"{ratio:.2f}x (per-pair {per_pair[0]:.2f}-{per_pair[-1]:.2f})",
                f"<= {TARGET}x", status(ratio <= TARGET), ratio=ratio)
    at_100k(head, a.size == "tiny", results)
    results.ratio("explain_over_lint", ratio, "(planc explain CPU time / planc lint CPU time)",
                  a.json)


CPU_TARGET, MEMORY_TARGET = 1.3, 1.3  # explain against lint at 100k variables


def at_100k(head: list[str], tiny: bool, results) -> None:
    """`planc explain` against `planc lint` of a 100k-variable model (keras_moe names,
    bench/models.py) at 8 devices, piped: CPU time and peak RSS, each pair of runs
    interleaved, medians of the per-pair ratios."""
    from common import PYTHON as py
    from models import manifest_text, model_for, rule_set

    model = model_for(1_000 if tiny else 100_000)
    runs = 1 if tiny else 5
    wrap = ("import resource, subprocess, sys; "
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "r = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "print(r.ru_utime + r.ru_stime, r.ru_maxrss * 1024, p.returncode)")
    with tempfile.TemporaryDirectory() as tmp:
        manifest, plan = Path(tmp) / "model.json", Path(tmp) / "plan.kd"
        manifest.write_text(manifest_text(model))
        plan.write_text(rule_set(model, 100 if not tiny else 10).plan_text())
        tail = [str(plan), "--model", str(manifest), "--devices", "8"]

        def once(command: str) -> tuple[float, int]:
            import subprocess

            out = subprocess.run([py, "-c", wrap, *head, command, *tail], capture_output=True,
                                 text=True, check=True).stdout.split()
            if out[2] not in ("0", "1"):
                raise SystemExit(f"planc {command} exited {out[2]}")
            return float(out[0]), int(out[1])

        once("explain"), once("lint")  # warm-up
        pairs = [(once("explain"), once("lint")) for _ in range(runs)]
    cpu = sorted(e[0] / li[0] for e, li in pairs)
    mem = sorted(e[1] / li[1] for e, li in pairs)
    count = len(model.paths())
    ex_cpu = statistics.median(e[0] for e, _ in pairs)
    li_cpu = statistics.median(li[0] for _, li in pairs)
    ex_mem = statistics.median(e[1] for e, _ in pairs)
    li_mem = statistics.median(li[1] for _, li in pairs)
    results.row(f"{count:,} variables: explain / lint, CPU time",
                f"{statistics.median(cpu):.2f}x (per-pair {cpu[0]:.2f}-{cpu[-1]:.2f}; "
                f"explain {ex_cpu:.2f} s, lint {li_cpu:.2f} s)", f"<= {CPU_TARGET}x",
                status(statistics.median(cpu) <= CPU_TARGET), ratio=statistics.median(cpu))
    results.row(f"{count:,} variables: explain / lint, peak RSS",
                f"{statistics.median(mem):.2f}x (per-pair {mem[0]:.2f}-{mem[-1]:.2f}; "
                f"explain {ex_mem / 2**20:.0f} MiB, lint {li_mem / 2**20:.0f} MiB)",
                f"<= {MEMORY_TARGET}x", status(statistics.median(mem) <= MEMORY_TARGET),
                ratio=statistics.median(mem))


if __name__ == "__main__":
    main()

"""Benchmark 2: CLI latency, `planc lint PLAN --model MANIFEST` against `python -c pass`.

Both are run as fresh subprocesses of the same interpreter and venv (the console
script the user runs, and a bare interpreter start), CPU time (user + system of the
child), after a warm-up that fills the OS file cache and writes the bytecode cache,
alternating the commands run by run; the figure is the median of the per-run ratios.
(`import jax` is no reference: its own time moved 2x between runs.)

`import planc` is timed the same way against `python -c pass` (its CPU time is the
difference), and one `python -X importtime` run of the lint shows where its start-up
goes: the heaviest top-level imports, each with the modules it pulled in. One more run
says which parser engine the lint used (the generated standalone parser, or lark when
`make venv` has not written it) and whether it loaded lark, `regex` or interegular.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ENV, PYTHON, ROOT, Results, Timing, args, command_time, status  # noqa: E402

TARGET = 2.0  # planc lint at most 2x a bare interpreter's start-up, CPU
IMPORT_TARGET_S = 0.040
SHOWN_IMPORTS = 8


def import_breakdown(cmd: list[str]) -> tuple[list, list]:
    """From one `-X importtime` run of `cmd`: the heaviest top-level imports with what
    they pulled in, and the heaviest modules by their own time, as (module, microseconds)."""
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    tops, selfs = [], []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own, cumulative, name = line[len("import time:"):].split("|")
        if len(name) - len(name.lstrip(" ")) <= 1:  # top level: holds its children
            tops.append((name.strip(), int(cumulative)))
        selfs.append((name.strip(), int(own)))
    def heaviest(rows):
        return sorted(rows, key=lambda t: -t[1])[:SHOWN_IMPORTS]
    return heaviest(tops), heaviest(selfs)


# Run in the lint's own interpreter: which engine parsed, and which heavy modules loaded.
_LOADED = """import sys
from planc.cli import main
main(sys.argv[1:])
from planc.syntax import grammar
print("LOADED", grammar.ENGINE, *(m for m in ("lark", "regex", "interegular") if m in sys.modules))
"""


def loaded(cmd: list[str]) -> tuple[str, list[str]]:
    """(the parser engine, the heavy modules loaded) of one `planc lint` run."""
    proc = subprocess.run([PYTHON, "-c", _LOADED, *cmd[cmd.index("lint"):]], cwd=ROOT,
                          env=ENV, capture_output=True, text=True)
    words = next(line.split()[1:] for line in proc.stdout.splitlines()
                 if line.startswith("LOADED "))
    return words[0], words[1:]


def planc_command() -> list[str]:
    script = Path(PYTHON).parent / "planc"
    head = [str(script)] if script.exists() else [PYTHON, "-m", "planc"]
    return head + ["lint", "plans/gemma.kd", "--model", "plans/models/gemma_2b.json"]


def main():
    a = args(__doc__.splitlines()[0])
    runs = 1 if a.size == "tiny" else 9
    results = Results("cli_latency", "CLI latency: planc lint vs python -c pass", a.size)
    lint = planc_command()
    bare_cmd, import_cmd = [PYTHON, "-c", "pass"], [PYTHON, "-c", "import planc"]
    # Alternated run by run, so a burst of load on the shared machine hits all alike.
    for cmd in (lint, bare_cmd, import_cmd):
        command_time(cmd, runs=1, warmup=0)  # warm-up, discarded
    planc_runs, bare_runs, import_runs = [], [], []
    for _ in range(runs):
        planc_runs.append(command_time(lint, runs=1, warmup=0))
        bare_runs.append(command_time(bare_cmd, runs=1, warmup=0))
        import_runs.append(command_time(import_cmd, runs=1, warmup=0))
    planc_t = Timing([t.cpu for t in planc_runs], [t.wall for t in planc_runs])
    bare_t = Timing([t.cpu for t in bare_runs], [t.wall for t in bare_runs])
    import_cpu = sorted(i.cpu - b.cpu for i, b in zip(import_runs, bare_runs))[runs // 2]
    per_run = sorted(p.cpu / b.cpu for p, b in zip(planc_runs, bare_runs))
    ratio = per_run[runs // 2]
    shown = " ".join(Path(x).name if i == 0 else x for i, x in enumerate(lint))
    results.row(f"`{shown}`", f"{planc_t.wall * 1e3:.0f} ms wall, {planc_t.cpu * 1e3:.0f} ms CPU",
                planc_wall_s=planc_t.wall, planc_cpu_s=planc_t.cpu, runs=runs)
    results.row('`python -c pass` (the same interpreter and venv)',
                f"{bare_t.wall * 1e3:.0f} ms wall, {bare_t.cpu * 1e3:.0f} ms CPU",
                bare_wall_s=bare_t.wall, bare_cpu_s=bare_t.cpu)
    results.row("planc lint / python -c pass (CPU time, median of per-run ratios)",
                f"{ratio:.2f}x (per-run {per_run[0]:.2f}-{per_run[-1]:.2f})", f"<= {TARGET}x",
                status(ratio <= TARGET), ratio=ratio)
    results.row("`import planc` CPU time (over `python -c pass`)",
                f"{import_cpu * 1e3:.1f} ms", f"<= {IMPORT_TARGET_S * 1e3:.0f} ms",
                status(import_cpu <= IMPORT_TARGET_S), import_cpu_s=import_cpu)
    engine, heavy = loaded(lint)
    results.row("`planc lint`: parser engine, and which of lark, regex, interegular it loads",
                f"{engine}; {', '.join(heavy) or 'none'}", engine=engine, loaded=heavy)
    traced = [PYTHON, "-X", "importtime", *(lint[1:] if lint[0] == PYTHON else lint)]
    tops, selfs = import_breakdown(traced)
    for name, micros in tops:
        results.row(f"`planc lint` start-up: `import {name}` with what it imports",
                    f"{micros / 1e3:.1f} ms", module=name, cumulative_us=micros)
    for name, micros in selfs:
        results.row(f"`planc lint` start-up: `{name}` on its own",
                    f"{micros / 1e3:.1f} ms", module=name, self_us=micros)
    results.ratio("cli_latency", ratio, "(planc lint CPU time / python -c pass CPU time)",
                  a.json)


if __name__ == "__main__":
    main()

"""Benchmark 9: `planc lsp` diagnostics latency on a 1,000-rule plan, against `planc lint`.

A real client (pygls's, as tests/lsp/test_lsp.py drives it) opens the plan in a running
`planc lsp`, then changes it, alternately breaking one rule (an unknown axis) and fixing
it; each figure is the wall time from sending `didChange` to receiving the diagnostics
published for that version. Typing inside a rule reparses only that rule
(`planc.lsp.incremental`); the second figure is for changes that add and remove a line,
which are parsed in full. The baseline is `planc lint` of the same
file as a fresh subprocess (what an editor without a server would run on save),
alternated with the changes, median of the runs.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from common import PYTHON, Results, args, command_time, status  # noqa: E402

TARGET_S = 0.1


def plan_text(rules: int, broken: int | None = None, extra_line: bool = False) -> str:
    lines = ["plan big", *(["# one more line"] if extra_line else []), "mesh(batch = auto, model = 4)", "model_parallel(batch = batch)",
             "layout {"]
    for i in range(rules - 1):
        axis = "modle" if i == broken else "model"
        lines.append(f'  "block_{i}/(query|key|value)/kernel" -> (_, {axis})')
    lines += ["  default -> replicated", "}", ""]
    return "\n".join(lines)


async def measure(path: Path, rules: int, runs: int, lint_cmd: list[str], *, lines: bool):
    from lsp_session import Session

    s = Session()
    await s.start()
    uri = s.open(path, path.read_text())
    await s.next_diagnostics(uri)
    latencies, lint_walls = [], []
    for run in range(runs + 1):  # the first is a warm-up, discarded
        broken = run % 2 == 0
        text = plan_text(rules, broken=rules // 2 if broken else None,
                         extra_line=lines and broken)
        seen = s.count(uri)
        t = time.perf_counter()
        s.change(uri, text, run + 2)
        diags = await s.next_diagnostics(uri, seen)
        dt = time.perf_counter() - t
        assert [d.code for d in diags] == (["P101"] if broken else []), diags
        lint = command_time(lint_cmd, runs=1, warmup=0)  # the server is idle meanwhile
        if run:
            latencies.append(dt)
            lint_walls.append(lint.wall)
    await s.stop()
    return latencies, lint_walls


def main():
    a = args(__doc__.splitlines()[0])
    rules = 1_000  # the size at both sizes: it takes well under a second
    runs = 2 if a.size == "tiny" else 11
    results = Results("lsp_latency", "planc lsp latency vs planc lint", a.size)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.kd"
        path.write_text(plan_text(rules))
        script = Path(PYTHON).parent / "planc"
        head = [str(script)] if script.exists() else [PYTHON, "-m", "planc"]
        lint_cmd = head + ["lint", str(path)]
        latencies, lint_walls = asyncio.run(measure(path, rules, runs, lint_cmd, lines=False))
        full, lint_walls_2 = asyncio.run(measure(path, rules, runs, lint_cmd, lines=True))
    lsp = statistics.median(latencies)
    lsp_full = statistics.median(full)
    lint = statistics.median(lint_walls + lint_walls_2)
    ratio = lsp / lint
    results.row(f"diagnostics after typing in a rule, {rules} rules (median of {runs})",
                f"{lsp * 1e3:.0f} ms (max {max(latencies) * 1e3:.0f} ms)",
                f"<= {TARGET_S * 1e3:.0f} ms", status(lsp <= TARGET_S), lsp_s=lsp,
                runs=latencies)
    results.row(f"diagnostics after adding or removing a line (parsed in full, median of "
                f"{runs})", f"{lsp_full * 1e3:.0f} ms (max {max(full) * 1e3:.0f} ms)",
                f"<= {TARGET_S * 1e3:.0f} ms", status(lsp_full <= TARGET_S),
                lsp_full_s=lsp_full, runs=full)
    results.row(f"`planc lint` of the same file (median of {runs})", f"{lint * 1e3:.0f} ms",
                lint_s=lint)
    results.row("planc lsp / planc lint (wall time)", f"{ratio:.2f}x", ratio=ratio)
    results.note("the latency is the client's: the JSON-RPC round trip, the server's "
                 "parse (of the rules touched, or of the whole text) and every check of "
                 "`planc lint`, and the diagnostics' conversion")
    results.ratio("lsp_latency", ratio, "(planc lsp change-to-diagnostics / planc lint, wall)",
                  a.json)


if __name__ == "__main__":
    main()

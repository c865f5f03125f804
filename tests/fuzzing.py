"""Fuzzing planc's front end: no plan text may crash it, hang it or mislead it.

`python tests/fuzzing.py --cases N` (what `make fuzz` runs) feeds N inputs through the
front end and the CLI, says first how long that will take, prints its progress, then
how many ran and every failure, and exits 1 on a failure. The test suite
(`tests/robustness/test_fuzz.py`) runs a few thousand of the same cases.

Inputs come from five places:

* `plans()`: grammar-aware plans. Every statement of `grammar/planc.lark` with random
  names, sizes, patterns, layouts and expressions; with `near=True` (the default) about
  half of them get one token deleted, duplicated, swapped with its neighbour or replaced.
* `mutated_corpus()`: byte-level mutations of the example plans in `plans/`: deletions,
  insertions of hostile bytes (NUL, bad UTF-8, quotes, brackets), swaps, truncation,
  a byte-order mark, CRLF line ends, non-UTF-8 bytes.
* `hostile_inputs()`: fixed cases no random walk reaches: a 10 MB line, thousands of
  nested brackets, expressions thousands of operations deep, a plan of 50,000 rules.
* `tests/fuzzing_io.py`: what planc reads besides plans, checkpoint headers with extreme
  numbers or data outside the file, and the language server's framing.
* `tests/fuzzing_imports.py`: the import grammars, Megatron layout strings and MaxText
  YAML configs.

The inputs are made in `tests/fuzzing_inputs.py` (the first three above); how one is run
and what counts as misbehaving is `tests/fuzzing_checks.py` (`check_case`, `check_cli`,
`check_subprocess`). This module is the campaign: it splits the cases among them.

It lives with the tests, not in the wheel: it needs hypothesis, a test dependency
(imported on first use).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

from fuzzing_checks import (SUBPROCESS_CASES, check_case, check_cli, check_subprocess,
                            make_workspace)
from fuzzing_inputs import corpus, hostile_inputs, mutate, plans

__all__ = ["run", "main"]


# -- the campaign --------------------------------------------------------------------------------

def run(cases: int, seed: int = 0, *, jobs: int = 1, extras: bool = True,
        progress: bool = False) -> tuple[int, list]:
    """Run `cases` fuzz cases; return (cases run, [(input, problems), ...]).

    The cases split as: 45% grammar-aware plans (hypothesis), 35% byte-level mutations
    of the example plans, 10% through the CLI in-process, 10% checkpoint headers and
    language-server input (`fuzzing_io`) and the import grammars (`fuzzing_imports`);
    with `extras`, then every
    hostile input and a few CLI runs in real subprocesses. `jobs` processes share the
    cases, each with its own seed; a failure seen in several is reported once.
    """
    if jobs <= 1:
        return _run_part(cases, seed, extras, progress)
    from concurrent.futures import ProcessPoolExecutor

    shares = [cases // jobs + (1 if i < cases % jobs else 0) for i in range(jobs)]
    with ProcessPoolExecutor(jobs) as pool:
        parts = [pool.submit(_run_part, n, seed + 7919 * i, extras and i == 0, progress and i == 0)
                 for i, n in enumerate(shares) if n or (extras and i == 0)]
        results = [p.result() for p in parts]
    count, failures, seen = 0, [], set()
    for n, found in results:
        count += n
        for data, problems in found:
            fresh = [p for p in problems if _signature(p) not in seen]
            seen.update(_signature(p) for p in problems)
            if fresh:
                failures.append((data, fresh))
    return count, failures


def _run_part(cases: int, seed: int, extras: bool, progress: bool) -> tuple[int, list]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    failures: list[tuple[object, list[str]]] = []
    seen: set[str] = set()
    count = 0
    started = time.monotonic()

    def record(data, problems):
        nonlocal count
        count += 1
        if progress and count % 1000 == 0:
            spent = time.monotonic() - started
            left = spent / count * (cases - count)
            print(f"  {count}/{cases} cases in this process, {_minutes(spent)}, "
                  f"about {_minutes(max(left, 0))} left", file=sys.stderr, flush=True)
        fresh = [p for p in problems if _signature(p) not in seen]
        seen.update(_signature(p) for p in problems)
        if fresh:
            failures.append((data, fresh))

    quick = dict(database=None, deadline=None, phases=[Phase.generate],
                 suppress_health_check=list(HealthCheck), derandomize=False)
    n_grammar = cases * 45 // 100
    n_cli = cases // 10
    n_io = cases // 10
    n_bytes = cases - n_grammar - n_cli - n_io
    with tempfile.TemporaryDirectory(prefix="planc-fuzz-") as tmp:
        plan_dir = make_workspace(tmp)
        file = plan_dir / "fuzz.kd"

        if n_grammar:
            @hseed(seed)
            @settings(max_examples=n_grammar, **quick)
            @given(plans())
            def grammar(text):
                record(text, check_case(text, file))

            grammar()

        rng = random.Random(seed)
        files = sorted(corpus().values())
        for _ in range(n_bytes):
            data = mutate(rng.choice(files), rng)
            record(data, check_case(data, file))

        if n_cli:
            @hseed(seed + 1)
            @settings(max_examples=n_cli, **quick)
            @given(plans())
            def cli(text):
                file.write_text(text, encoding="utf-8", errors="surrogatepass")
                # With a model, explain and compile run too: ten times the work, so 1 in 10.
                record(text, check_cli(file, model=count % 10 == 0))

            cli()

        if n_io:
            import fuzzing_imports
            import fuzzing_io
            from hypothesis import strategies as st

            @hseed(seed + 2)
            @settings(max_examples=n_io, **quick)
            @given(st.data())
            def io_cases(data):
                kind = data.draw(st.sampled_from(["checkpoint", "stream", "megatron",
                                                  "maxtext"]))
                if kind == "checkpoint":
                    path = data.draw(fuzzing_io.checkpoints(tmp))
                    record(path, fuzzing_io.check_checkpoint(path))
                elif kind == "stream":
                    stream = data.draw(fuzzing_io.streams())
                    record(stream, fuzzing_io.check_stream(stream))
                elif kind == "megatron":
                    text, layers = data.draw(fuzzing_imports.megatron_layouts())
                    record((text, layers), fuzzing_imports.check_megatron(text, layers, tmp))
                else:
                    config = data.draw(fuzzing_imports.maxtext_configs())
                    record(config, fuzzing_imports.check_maxtext(config, tmp))

            io_cases()

        if extras:
            for name, data in hostile_inputs().items():
                file.write_bytes(data)
                record(name, check_case(data, file) + check_cli(file, model=False))
            for name in SUBPROCESS_CASES:
                file.write_bytes(hostile_inputs()[name])
                record(name, check_subprocess(file))
    return count, failures


def _signature(problem: str) -> str:
    """A failure's kind, so one bug met a thousand times is reported once."""
    import re

    return re.sub(r"\(.*|\d+", "#", problem)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


# Cases timed before a campaign to say how long it will run: enough to average the
# mix of grammar, byte and CLI cases, few enough to cost a few seconds.
_CALIBRATION_CASES = 200


def estimate(cases: int, jobs: int, seed: int) -> float:
    """Seconds `cases` cases will take on `jobs` processes, from timing a short run."""
    sample = min(cases, _CALIBRATION_CASES)
    started = time.monotonic()
    _run_part(sample, seed + 104_729, False, False)
    per_case = (time.monotonic() - started) / max(sample, 1)
    return per_case * cases / max(min(jobs, cases), 1)


def main(argv: list[str] | None = None) -> int:
    """`python tests/fuzzing.py --cases N [--seed S]`: 0 when every case behaved, else 1."""
    parser = argparse.ArgumentParser(prog="python tests/fuzzing.py", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="how many cases to run")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 8),
                        help="processes to run in parallel (default: the CPUs, at most 8)")
    parser.add_argument("--no-extras", dest="extras", action="store_false",
                        help="skip the fixed hostile inputs and the subprocess runs")
    parser.add_argument("--quiet", dest="progress", action="store_false",
                        help="no estimate and no progress lines, only the result")
    args = parser.parse_args(argv)
    if not corpus():
        print("planc fuzz: no example plans (plans/*.kd) to mutate; run it from the "
              "source tree", file=sys.stderr)
        return 2
    if args.progress:
        jobs = max(min(args.jobs, args.cases), 1)
        print(f"planc fuzz: {args.cases} cases on {jobs} process{'es' if jobs > 1 else ''}; "
              f"about {_minutes(estimate(args.cases, jobs, args.seed))} (timed on "
              f"{min(args.cases, _CALIBRATION_CASES)} cases), plus the hostile inputs",
              file=sys.stderr, flush=True)
    started = time.monotonic()
    count, failures = run(args.cases, args.seed, jobs=args.jobs, extras=args.extras,
                          progress=args.progress)
    elapsed = time.monotonic() - started
    print(f"planc fuzz: {count} cases in {elapsed:.0f} s, {len(failures)} failing")
    for data, problems in failures:
        shown = repr(data if len(data) <= 400 else data[:400] + (b"..." if isinstance(
            data, bytes) else "..."))
        print(f"\ninput: {shown}")
        for p in problems:
            print(f"  - {p}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

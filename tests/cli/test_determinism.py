"""Every output planc prints or writes is byte-identical across runs, across
`PYTHONHASHSEED` values, and whatever the order of the input files on the command line."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from planc.cli import main

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "plans"
MODEL = PLANS / "models" / "gemma_2b.json"

# Many findings of many kinds, in two files, so their order is something to get wrong.
FAULTY = """\
include "shared.kd"
param tp = 2
param tp = 3
mesh(batch = auto, model = tp, batch = 2, extra = auto)
model_parallel(batch = (model, nope))
match fulll
layout {
    "dense/kernel" -> (modle, batch, model)
    "dense/kernel" -> replicated
    "(a)\\\\1" -> (_, ..., ...)
    default -> replicated
    default -> (_, model)
}
budget(per_device = 0 GB, stat = 2)
check tp % 3 == 0, "tp must be a multiple of 3"
check heads > 0, "unknown name"
cluster { nodes = 2, processes = "x" }
"""
SHARED = 'param heads = 8\nlayout { "[" -> (model) }\n'
UNFORMATTED = "mesh(batch=auto,model=2) model_parallel(batch=batch)\n" \
              'layout{"a"->(_,model)|replicated  # why\n"b"->replicated}\n'


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("det")
    (d / "faulty.kd").write_text(FAULTY)
    (d / "shared.kd").write_text(SHARED)
    (d / "unformatted.kd").write_text(UNFORMATTED)
    return d


def commands(d: Path) -> list[list[str]]:
    plans = sorted(str(p) for p in PLANS.glob("*.kd")) + [str(d / "faulty.kd")]
    runs = [["lint", "--format", f, "--color", "never", "--devices", "8,3,64", *plans]
            for f in ("text", "json", "github", "sarif")]
    runs.append(["lint", "--color", "always", *plans])
    # Against a model: the plans written for other models find plenty to say about it.
    runs += [["lint", "--format", f, "--model", str(MODEL), "-D", "tp=2", "--devices", "8,64",
              *plans[:-1]] for f in ("text", "json", "sarif")]
    runs.append(["fmt", "--diff", "--color", "never", str(d / "unformatted.kd"),
                 str(d / "faulty.kd"), *plans])
    runs.append(["inspect", str(MODEL)])
    runs.append(["explain", str(PLANS / "gemma.kd"), "--model", str(MODEL), "-D", "tp=2",
                 "--devices", "8", "--color", "never"])
    runs.append(["explain", str(PLANS / "gemma.kd"), "--model", str(MODEL), "-D", "tp=2",
                 "--devices", "8", "--format", "json"])
    runs.append(["explain", str(PLANS / "gemma.kd"), "--model", str(MODEL), "-D", "tp=2",
                 "--devices", "8", "--format", "html"])
    # The torch module with the model's table, and an HF tp plan.
    runs.append(["compile", str(PLANS / "gemma.kd"), "--model", str(MODEL), "-D", "tp=2",
                 "--devices", "8", "--target", "torch"])
    runs.append(["compile", str(PLANS / "hf_qwen2_tp.kd"), "--target", "hf"])
    return runs


def run_all(runs, capsys):
    out = []
    for argv in runs:
        code = main(argv)
        o, e = capsys.readouterr()
        out.append([code, o, e])
    return out


# Runs every command in a fresh interpreter and prints [[code, stdout, stderr], ...].
_CHILD = textwrap.dedent("""
    import contextlib, io, json, sys
    from planc.cli import main
    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        results.append([code, out.getvalue(), err.getvalue()])
    sys.stdout.write(json.dumps(results))
""")


def run_in_child(runs, seed: str):
    env = {**os.environ, "PYTHONHASHSEED": seed}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(runs)], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_command_has_output_worth_comparing(files, capsys):
    results = run_all(commands(files), capsys)
    assert all(code in (0, 1) for code, _, _ in results), [r[0] for r in results]
    assert all(out for _, out, _ in results)
    assert "P111" in results[0][1] and "P124" not in results[0][1]


def test_outputs_are_identical_run_after_run(files, capsys):
    runs = commands(files)
    assert run_all(runs, capsys) == run_all(runs, capsys)


def test_outputs_are_identical_under_different_hash_seeds(files, capsys):
    runs = commands(files)
    here = run_all(runs, capsys)
    for seed in ("0", "1", "4242"):
        there = run_in_child(runs, seed)
        for argv, mine, theirs in zip(runs, here, there):
            assert mine == theirs, f"PYTHONHASHSEED={seed}: planc {' '.join(argv[:3])} differs"


def test_lint_output_does_not_depend_on_the_order_of_the_files(files, capsys):
    plans = sorted(str(p) for p in PLANS.glob("*.kd")) + [str(files / "faulty.kd")]
    for fmt in ("text", "json", "github", "sarif"):
        forward = run_all([["lint", "--format", fmt, "--color", "never", *plans]], capsys)
        backward = run_all([["lint", "--format", fmt, "--color", "never", *plans[::-1]]],
                           capsys)
        assert forward == backward, fmt


def test_lint_output_does_not_depend_on_a_file_named_twice(files, capsys):
    plan = str(files / "faulty.kd")
    once = run_all([["lint", "--format", "json", plan]], capsys)
    twice = run_all([["lint", "--format", "json", plan, plan]], capsys)
    assert once == twice


def test_fmt_output_does_not_depend_on_the_order_of_the_files(files, capsys):
    plans = [str(files / "unformatted.kd"), str(files / "faulty.kd"), str(PLANS / "gemma.kd")]
    forward = run_all([["fmt", "--diff", "--color", "never", *plans]], capsys)
    backward = run_all([["fmt", "--diff", "--color", "never", *plans[::-1]]], capsys)
    assert forward == backward


def test_lint_report_file_is_identical_whatever_the_order_of_the_files(files, capsys, tmp_path):
    plans = [str(files / "faulty.kd"), str(PLANS / "gemma.kd"), str(PLANS / "jax_stacked.kd")]
    written = []
    for order in (plans, plans[::-1]):
        report = tmp_path / "report.sarif"
        main(["lint", "--format", "sarif", "-o", str(report), *order])
        written.append(report.read_bytes())
    capsys.readouterr()
    assert written[0] == written[1]

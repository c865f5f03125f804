"""The benchmark scripts run: each one, at its tiny size, prints its ratio line last.

No timing or memory threshold is asserted here (the figures live in docs/benchmarks.md,
written by `make bench`); these tests only keep the scripts from rotting.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

SCRIPTS = ["resolution", "cli_latency", "born_sharded", "front_end", "validate_405b",
           "suggest_405b", "load_checkpoint", "reshard_memory", "lsp_latency",
           "explain_405b", "matching_floor", "aot", "shardings", "load_many", "maxtext_mfu",
           "chip_cost", "chip_load", "chip_search"]


def run_tiny(name: str, tmp_path: Path) -> tuple[list[str], dict]:
    out = tmp_path / f"{name}.json"
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, str(BENCH / f"{name}.py"), "--size", "tiny",
                           "--json", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout.strip().splitlines(), json.loads(out.read_text())


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_prints_its_ratio_last(name, tmp_path):
    lines, data = run_tiny(name, tmp_path)
    last = lines[-1].split()
    assert last[0] == "RATIO" and last[1] == data["ratio"]["name"]
    assert float(last[2]) == pytest.approx(data["ratio"]["value"], rel=1e-3)
    assert data["rows"], "a benchmark reports at least one figure"


def test_rule_sets_have_the_requested_size_and_end_with_default():
    from models import model_for, rule_set

    for size, count in ((1_000, 10), (10_000, 100), (100_000, 500)):
        rules = rule_set(model_for(size), count)
        assert len(rules.rules) == count
        assert rules.rules[-1].pattern is None


def test_generated_rules_give_planc_and_keras_the_same_answers():
    import re

    import planc
    from models import model_for, rule_set
    from planc.resolve import Resolver
    from planc.variables import Variable

    model = model_for(10_000)
    rules = rule_set(model, 300)
    keys = rules.keras_entries()
    variables = [Variable(p, s, model.dtype) for p, s in model.paths()][::37]
    resolution = Resolver(planc.loads(rules.plan_text()).ir).resolve_all(variables)
    for var, a in zip(variables, resolution.assignments):
        hits = [axes for key, axes in keys if key == var.path or re.fullmatch(key, var.path)]
        assert len(hits) <= 1, var.path
        expected = hits[0] if hits else (None,) * var.rank
        assert tuple(a.layout.axes) == tuple(expected), var.path


def test_run_writes_a_table_with_every_figure(tmp_path):
    out = tmp_path / "B.md"
    proc = subprocess.run([sys.executable, str(BENCH / "run.py"), "--size", "tiny", "--only",
                           "validate_405b", "-o", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    text = out.read_text()
    assert "## Machine" in text and "| figure | value | target | result |" in text
    assert "peak RSS of the lint" in text and "jax " in text


@pytest.mark.parametrize("status", ["MISS", "pass"])
@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_says_what_limits_it_met_or_missed(name, status):
    import run

    done = {"bench": name, "title": name, "size": "full", "seconds": 1.0, "notes": [],
            "rows": [{"figure": "f", "value": "v", "target": "t", "status": status, "raw": {}}],
            "ratio": {"name": name, "value": 2.0, "meaning": "(m)"}}
    facts = {"cpu": "cpu", "cores": 2, "memory_bytes": 2**30, "os": "os",
             "versions": {"jax": "0"}}
    text = run.markdown([done], facts, 60.0, "full")
    assert run.TITLES[name] in text
    assert "**What limits it:** " + run.LIMITS[name] in text


def test_rerunning_one_benchmark_keeps_the_other_sections_as_they_were():
    import run

    facts = {"cpu": "cpu", "cores": 2, "memory_bytes": 2**30, "os": "os",
             "versions": {"jax": "0"}}

    def result(name, value):
        return {"bench": name, "title": name, "size": "full", "seconds": 1.0, "notes": [],
                "rows": [{"figure": "f", "value": value, "target": "", "status": "",
                          "raw": {}}]}

    earlier = run.markdown([result("resolution", "old 1"), result("load_checkpoint", "old 7")],
                           facts, 60.0, "full")
    page = run.markdown([result("validate_405b", "new 5")], facts, 1.0, "full",
                        run._sections(earlier))
    sections = run._sections(page)
    assert list(sections) == ["1", "5", "7"]
    assert sections["1"] == run._sections(earlier)["1"]
    assert sections["7"] == run._sections(earlier)["7"]
    assert "new 5" in sections["5"]


def test_every_benchmark_has_a_numbered_title_and_its_own_limit_text():
    import run

    numbers = sorted(int(run.TITLES[name].split(".", 1)[0]) for name, _ in run.BENCHMARKS)
    assert numbers == list(range(1, len(run.BENCHMARKS) + 1))
    assert set(run.LIMITS) == {name for name, _ in run.BENCHMARKS}
    assert len(set(run.LIMITS.values())) == len(run.LIMITS)

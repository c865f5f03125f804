"""`planc suggest` on the command line: stdout or an atomic `-o`, the mesh `auto` picks,
budgets nothing fits, and every bad input as a diagnostic or a one-line usage error with
the README's exit codes and no output file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from suggest.test_suggest import hf_llama

import planc
from planc.cli.dispatch import main as planc_main
from planc.diagnostics import PlanError
from planc.sources import write_manifest
from planc.suggest import suggest


def _manifest(tmp_path, variables, name="model.json"):
    path = tmp_path / name
    write_manifest(variables, str(path))
    return str(path)


def _llama_like(layers=2, hidden=64, heads_dim=64, ffn=128, vocab=256):
    vs = [planc.Variable("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(layers):
        p = f"model.layers.{i}."
        vs += [planc.Variable(p + "self_attn.q_proj.weight", (heads_dim, hidden)),
               planc.Variable(p + "self_attn.o_proj.weight", (hidden, heads_dim)),
               planc.Variable(p + "mlp.up_proj.weight", (ffn, hidden)),
               planc.Variable(p + "mlp.down_proj.weight", (hidden, ffn)),
               planc.Variable(p + "input_layernorm.weight", (hidden,))]
    return vs


def run(capsys, *argv):
    capsys.readouterr()
    try:
        rc = planc_main(["suggest", *argv, "--color", "never"])
    except SystemExit as exc:  # argparse's own errors (an unknown --strategy): exit 2
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, out.err


# -- output --------------------------------------------------------------------------------

def test_the_plan_goes_to_stdout_by_default(tmp_path, capsys):
    src = hf_llama(tmp_path)
    rc, out, err = run(capsys, "--model", src, "--devices", "8")
    assert rc == 0 and err == ""
    assert out.startswith("# Suggested by `planc suggest`") and "layout {" in out


def test_dash_o_writes_the_same_plan_atomically_and_names_it_after_the_file(tmp_path, capsys):
    src = hf_llama(tmp_path)
    rc, out, _ = run(capsys, "--model", src, "--devices", "8")
    target = tmp_path / "llama-8.kd"
    rc2, out2, _ = run(capsys, "--model", src, "--devices", "8", "-o", str(target))
    assert rc == rc2 == 0 and out2 == ""
    written = target.read_text()
    assert written.replace("plan llama_8", "plan suggested") == out
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_output_is_byte_identical_across_runs_and_hash_seeds(tmp_path):
    src = hf_llama(tmp_path)
    outs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-m", "planc", "suggest", "--model", src,
                               "--devices", "8", "--strategy", "fsdp_tp"],
                              capture_output=True, env=env, check=True)
        outs.add(proc.stdout)
    assert len(outs) == 1


def test_the_result_lints_clean_with_the_real_cli_in_a_subprocess(tmp_path):
    src = hf_llama(tmp_path)
    plan = tmp_path / "plan.kd"
    subprocess.run([sys.executable, "-m", "planc", "suggest", "--model", src, "--devices", "8",
                    "-o", str(plan)], check=True)
    lint = subprocess.run([sys.executable, "-m", "planc", "lint", "--strict", str(plan),
                           "--model", src, "--devices", "8"], capture_output=True, text=True,
                          check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = subprocess.run([sys.executable, "-m", "planc", "fmt", "--check", str(plan)],
                         capture_output=True, text=True, check=False)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


# -- the mesh `auto` picks -------------------------------------------------------------------

def test_auto_is_pure_fsdp_when_fsdp_alone_splits_everything(tmp_path):
    s = suggest(_llama_like(), 8)
    assert s.choice.strategy == "fsdp" and "mesh(fsdp = auto)" in s.text


def test_auto_takes_the_smallest_tp_size_that_lets_everything_be_split():
    # hidden 20 and width 12 do not divide by 8, so FSDP over all 8 devices leaves them
    # whole; with `model = 2` (heads and widths divide by 2), FSDP over 4 splits the rest.
    vs = [planc.Variable(f"blk_{i}/attn/query", (20, 2, 10)) for i in range(2)] + \
         [planc.Variable(f"blk_{i}/mlp/up", (20, 12)) for i in range(2)] + \
         [planc.Variable(f"blk_{i}/mlp/down", (12, 20)) for i in range(2)]
    s = suggest(vs, 8)
    assert (s.choice.strategy, s.choice.tp, s.choice.fsdp) == ("fsdp_tp", 2, 4)
    whole = sum(a.variable.nbytes for a in s.report.assignments if a.layout.is_replicated)
    assert whole == 0


def test_auto_never_offers_a_tp_size_that_does_not_divide_the_query_heads():
    vs = [planc.Variable(f"blk_{i}/attn/query", (20, 6, 10)) for i in range(2)] + \
         [planc.Variable(f"blk_{i}/mlp/up", (20, 12)) for i in range(2)]
    s = suggest(vs, 8, strategy="fsdp_tp")
    assert s.choice.tp == 2  # 4 and 8 do not divide 6 heads
    with pytest.raises(PlanError) as e:
        suggest(vs, 8, strategy="fsdp_tp", tp=4)
    d = e.value.diagnostics[0]
    assert d.code == "P504" and "heads (6)" in d.message and "2" in d.help[0]


def test_a_tight_budget_is_met_exactly_and_one_byte_less_is_p501():
    vs = _llama_like()
    best = suggest(vs, 8, state=3)
    need = best.report.memory.per_device_bytes * 3
    assert suggest(vs, 8, budget=need, state=3).report.memory.per_device_bytes * 3 <= need
    with pytest.raises(PlanError) as e:
        suggest(vs, 8, budget=need - 1, state=3)
    assert e.value.diagnostics[0].code == "P501"


def test_a_budget_nothing_fits_says_the_smallest_device_count_and_budget_that_would(
        tmp_path, capsys):
    vs = _llama_like(layers=4)
    src = _manifest(tmp_path, vs)
    budget = 30_000
    target = tmp_path / "plan.kd"
    rc, out, err = run(capsys, "--model", src, "--devices", "2", "--budget", f"{budget}B",
                       "-o", str(target))
    assert rc == 1 and out == "" and not target.exists()
    assert "error[P501]" in err
    said = int(re.search(r"(\d+) devices would fit it", err).group(1))
    # the count it names fits, and no smaller count does
    suggest(vs, said, budget=budget)
    for n in range(3, said):
        with pytest.raises(PlanError):
            suggest(vs, n, budget=budget)
    need = int(re.search(r"a budget of at least [^(]+\(([\d,]+) bytes\)", err).group(1)
               .replace(",", ""))
    suggest(vs, 2, budget=need)


# -- bad input -------------------------------------------------------------------------------

@pytest.mark.parametrize("devices", ["0", "1", "-4", "eight", ""])
def test_fewer_than_two_devices_is_a_one_line_usage_error(tmp_path, capsys, devices):
    src = _manifest(tmp_path, _llama_like())
    target = tmp_path / "plan.kd"
    rc, out, err = run(capsys, "--model", src, "--devices", devices, "-o", str(target))
    assert rc == 2 and out == "" and not target.exists()
    assert len(err.strip().splitlines()) == 1 and "--devices" in err and "Traceback" not in err


def test_a_model_with_no_variables_is_a_one_line_error_and_no_file(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"planc_manifest": 1, "variables": []}))
    target = tmp_path / "plan.kd"
    rc, out, err = run(capsys, "--model", str(empty), "--devices", "8", "-o", str(target))
    assert rc == 2 and out == "" and not target.exists()
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_no_variables_through_the_python_api_is_p502():
    with pytest.raises(PlanError) as e:
        suggest([], 8)
    assert e.value.diagnostics[0].code == "P502"


def test_an_unreadable_model_is_exit_2_and_leaves_an_old_output_alone(tmp_path, capsys):
    target = tmp_path / "plan.kd"
    target.write_text("# the plan from yesterday\n")
    for src in (str(tmp_path / "missing.safetensors"), str(tmp_path)):
        rc, out, err = run(capsys, "--model", src, "--devices", "8", "-o", str(target))
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\xff" * 12)
    rc, _, err = run(capsys, "--model", str(broken), "--devices", "8", "-o", str(target))
    assert rc == 2 and "Traceback" not in err
    assert target.read_text() == "# the plan from yesterday\n"


@pytest.mark.parametrize("argv, option", [
    (["--budget", "lots"], "--budget"), (["--budget", "0GB"], "--budget"),
    (["--tp", "0"], "--tp"), (["--state", "0"], "--state"), (["--strategy", "zero"], "strategy"),
])
def test_bad_options_are_one_line_usage_errors(tmp_path, capsys, argv, option):
    src = _manifest(tmp_path, _llama_like())
    rc, out, err = run(capsys, "--model", src, "--devices", "8", *argv)
    assert rc == 2 and out == "" and option in err and "Traceback" not in err


def test_a_tp_size_that_does_not_divide_the_devices_is_p504_exit_1(tmp_path, capsys):
    src = _manifest(tmp_path, _llama_like())
    rc, out, err = run(capsys, "--model", src, "--devices", "8", "--tp", "3")
    assert rc == 1 and out == "" and "error[P504]" in err and "does not divide the 8 devices" in err


def test_a_large_variable_no_axis_divides_is_p507_not_a_plan_with_a_warning():
    vs = [planc.Variable("blob", (8191, 8191)), planc.Variable("w", (64, 64))]
    with pytest.raises(PlanError) as e:
        suggest(vs, 8)
    d = e.value.diagnostics[0]
    assert d.code == "P507" and d.variable == "blob"


# -- the 405B manifest of bench/ ---------------------------------------------------------------

def _llama3_405b():
    sys.path.insert(0, str(os.path.join(os.path.dirname(__file__), "..", "..", "bench")))
    from models import llama3_405b

    return [planc.Variable(p, tuple(s), "bfloat16") for p, s in llama3_405b()]


@pytest.mark.parametrize("devices", [8, 64, 512])
def test_llama3_405b_gets_one_rule_per_family_and_splits_evenly(devices):
    vs = _llama3_405b()
    s = suggest(vs, devices, strategy="fsdp")
    assert s.report.ok and not [d for d in s.report.diagnostics if d.severity != "note"]
    assert s.report.memory.per_device_bytes <= 1.1 * s.report.memory.total_bytes / devices
    assert sum(1 for line in s.text.splitlines() if "->" in line) <= 8  # of 1,137 variables


def test_tp_with_the_fsdp_strategy_is_a_contradiction_p504():
    with pytest.raises(PlanError) as e:
        suggest(_llama_like(), 8, strategy="fsdp", tp=2)
    assert e.value.diagnostics[0].code == "P504"


def test_a_keras_model_named_as_module_attr_is_suggested_for_in_a_subprocess(tmp_path):
    (tmp_path / "tiny_llama.py").write_text(
        "import keras_hub\n"
        "model = keras_hub.models.LlamaBackbone(vocabulary_size=96, num_layers=2,\n"
        "    num_query_heads=4, num_key_value_heads=2, hidden_dim=64, intermediate_dim=160)\n")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-m", "planc", "suggest", "--model",
                           "tiny_llama:model", "--devices", "8", "--strategy", "fsdp_tp",
                           "-o", "plan.kd"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (tmp_path / "plan.kd").read_text()
    assert r'"transformer_layer_\d+/self_attention/(query|key|value)/kernel"' in text
    lint = subprocess.run([sys.executable, "-m", "planc", "lint", "--strict", "plan.kd",
                           "--model", "tiny_llama:model", "--devices", "8"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr

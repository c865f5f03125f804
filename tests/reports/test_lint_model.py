"""`planc lint PLAN --model SRC`: Hugging Face Llama checkpoints written with the
safetensors library, checked with plans/llama_fsdp_tp.kd at one or several device
counts, in every output format.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

from planc.cli import main

ROOT = Path(__file__).resolve().parents[2]
LLAMA_PLAN = str(ROOT / "plans" / "llama_fsdp_tp.kd")


def write_llama(path, *, layers=2, hidden=32, heads=4, kv_heads=2, head_dim=8, ff=64,
                vocab=64, tied=False):
    """A tiny Llama checkpoint under Hugging Face names; torch Linear weights are
    (out_features, in_features)."""
    shapes = {"model.embed_tokens.weight": (vocab, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (heads * head_dim, hidden),
            p + "self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
            p + "self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
            p + "self_attn.o_proj.weight": (hidden, heads * head_dim),
            p + "mlp.gate_proj.weight": (ff, hidden),
            p + "mlp.up_proj.weight": (ff, hidden),
            p + "mlp.down_proj.weight": (hidden, ff),
            p + "input_layernorm.weight": (hidden,),
            p + "post_attention_layernorm.weight": (hidden,),
        })
    shapes["model.norm.weight"] = (hidden,)
    if not tied:
        shapes["lm_head.weight"] = (vocab, hidden)
    safetensors.numpy.save_file({k: np.zeros(s, np.float16) for k, s in shapes.items()},
                                str(path))
    return str(path)


@pytest.fixture
def llama(tmp_path):
    return write_llama(tmp_path / "model.safetensors")


def lint(capsys, *args):
    code = main(["lint", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def lint_json(capsys, *args):
    code, out, err = lint(capsys, *args, "--format", "json")
    return code, json.loads(out)


def test_llama_checkpoint_fits_the_plan_at_8_devices(capsys, llama):
    code, out, err = lint(capsys, LLAMA_PLAN, "--model", llama, "--devices", "8")
    assert (code, out) == (0, "")
    assert err == f"planc: checked 1 plan against `{llama}` (21 variables), at 8 devices: " \
        "no problems\n"


def test_each_device_count_is_reported_on_its_own(capsys, llama):
    code, doc = lint_json(capsys, LLAMA_PLAN, "--model", llama, "--devices", "8,64,512")
    assert code == 1
    # fsdp = 512 / 4 = 128 does not divide the hidden size 32; 8 and 64 devices fit.
    assert {d["devices"] for d in doc["diagnostics"]} == {512}
    embed = [d for d in doc["diagnostics"] if d["variable"] == "model.embed_tokens.weight"]
    assert [d["code"] for d in embed] == ["P303"]
    assert "`fsdp` (size 128)" in embed[0]["message"]


def test_text_output_says_which_device_count_failed(capsys, llama):
    code, out, _ = lint(capsys, LLAMA_PLAN, "--model", llama, "--devices", "64,512",
                        "--color", "never")
    assert code == 1
    assert "error[P303]" in out and "= with 512 devices" in out
    assert "with 64 devices" not in out


def test_device_count_that_does_not_fit_the_mesh_is_p201(capsys, llama):
    code, doc = lint_json(capsys, LLAMA_PLAN, "--model", llama, "--devices", "6")
    assert code == 1
    assert [(d["code"], d["devices"]) for d in doc["diagnostics"]] == [("P201", 6)]


def test_auto_axis_without_devices_checks_the_rest_and_notes_what_it_skipped(capsys, llama):
    code, doc = lint_json(capsys, LLAMA_PLAN, "--model", llama)
    assert code == 0
    (d,) = doc["diagnostics"]
    assert (d["code"], d["severity"], d["line"], d["column"]) == ("P202", "note", 9, 6)
    assert "`fsdp`" in d["message"] and d["devices"] is None


def test_json_diagnostics_carry_structured_fields(capsys, tmp_path):
    model = write_llama(tmp_path / "m.safetensors", kv_heads=1, head_dim=2)
    code, doc = lint_json(capsys, LLAMA_PLAN, "--model", model, "--devices", "8")
    assert code == 1
    assert doc["schema"] == "planc.diagnostics/1"
    (d,) = doc["diagnostics"]  # k_proj and v_proj: (2, 32) on model = 4, grouped
    assert d["code"] == "P303" and d["severity"] == "error"
    assert d["file"] == LLAMA_PLAN and (d["line"], d["column"]) == (15, 5)
    assert d["variable"] == "model.layers.0.self_attn.k_proj.weight"
    assert d["rule"] == f"{LLAMA_PLAN}:15"
    assert d["devices"] == 8
    assert doc["summary"] == {"errors": 1, "warnings": 0, "notes": 0}


def test_github_format_prints_workflow_annotations(capsys, tmp_path):
    model = write_llama(tmp_path / "m.safetensors", kv_heads=1, head_dim=2)
    code, out, _ = lint(capsys, LLAMA_PLAN, "--model", model, "--devices", "8",
                        "--format", "github")
    assert code == 1
    (line,) = out.splitlines()
    assert line.startswith("::error file=")
    assert ",line=15,col=5," in line and "title=P303" in line


def test_sarif_format_is_structurally_valid(capsys, tmp_path):
    model = write_llama(tmp_path / "m.safetensors", kv_heads=1, head_dim=2, tied=True)
    code, out, _ = lint(capsys, LLAMA_PLAN, "--model", model, "--devices", "8",
                        "--format", "sarif")
    assert code == 1
    doc = json.loads(out)
    assert doc["version"] == "2.1.0"
    (run,) = doc["runs"]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules == ["P303", "P306"]
    for result in run["results"]:
        assert result["ruleId"] in rules
        assert rules[result["ruleIndex"]] == result["ruleId"]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels == {"P303": "error", "P306": "warning"}


def test_strict_turns_warnings_into_exit_1(capsys, tmp_path):
    # Tied embeddings: no lm_head.weight, so the plan's lm_head rule matches nothing.
    model = write_llama(tmp_path / "tied.safetensors", tied=True)
    code, doc = lint_json(capsys, LLAMA_PLAN, "--model", model, "--devices", "8")
    assert code == 0
    assert [(d["code"], d["line"]) for d in doc["diagnostics"]] == [("P306", 21)]
    assert lint(capsys, LLAMA_PLAN, "--model", model, "--devices", "8", "--strict")[0] == 1


def test_json_report_can_be_written_to_a_file(capsys, tmp_path, llama):
    out = tmp_path / "report.json"
    code, stdout, _ = lint(capsys, LLAMA_PLAN, "--model", llama, "--devices", "512",
                           "--format", "json", "-o", str(out))
    assert code == 1 and stdout == ""
    assert json.loads(out.read_text())["summary"]["errors"] >= 1


def test_unreadable_model_is_one_line_and_exit_2(capsys, tmp_path):
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(b"\x00" * 3)
    code, out, err = lint(capsys, LLAMA_PLAN, "--model", str(bad))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("planc: ") and "broken.safetensors" in err


def test_planc_lint_process_exit_codes(tmp_path, llama):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "planc", "lint", LLAMA_PLAN, *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)

    clean = run("--model", llama, "--devices", "8", "--quiet")
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")
    failing = run("--model", llama, "--devices", "512")
    assert failing.returncode == 1 and "error[P303]" in failing.stdout
    assert "\x1b[" not in failing.stdout  # piped: no colour
    missing = run("--model", str(tmp_path / "nope.safetensors"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("planc: ")

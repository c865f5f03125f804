"""`planc lint PLAN --model SRC --checkpoint CKPT`: a checkpoint checked from its headers
alone, with real safetensors files, in every output format."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from planc.cli import main

PLAN = r'''mesh(batch = 2)
data_parallel

rename {
    "model\.layers\.(\d+)\.mlp\.up_proj\.weight" -> "layers/\1/up/kernel" transpose
    "model\.norm\.weight"                       -> "norm/scale"
}
'''

# The model the checkpoint is meant for (a manifest, as `planc inspect` writes one).
MODEL = {"planc_manifest": 1, "variables": [
    {"path": "layers/0/up/kernel", "shape": [4, 6], "dtype": "float32"},
    {"path": "layers/1/up/kernel", "shape": [4, 6], "dtype": "float32"},
    {"path": "norm/scale", "shape": [4], "dtype": "float32"},
]}


def tensors(**overrides):
    out = {
        "model.layers.0.mlp.up_proj.weight": np.zeros((6, 4), np.float32),
        "model.layers.1.mlp.up_proj.weight": np.zeros((6, 4), np.float32),
        "model.norm.weight": np.zeros((4,), np.float32),
    }
    out.update(overrides)
    return {k: v for k, v in out.items() if v is not None}


@pytest.fixture
def files(tmp_path, plan_file):
    def write(plan=PLAN, **overrides):
        ckpt = tmp_path / "model.safetensors"
        save_file(tensors(**overrides), str(ckpt))
        model = tmp_path / "model.json"
        model.write_text(json.dumps(MODEL))
        return str(plan_file(plan)), str(model), str(ckpt)

    return write


def lint(*args):
    return main(["lint", "--color", "never", *map(str, args)])


def test_the_checkpoint_of_the_model_passes(files, capsys):
    plan, model, ckpt = files()
    assert lint(plan, "--model", model, "--checkpoint", ckpt) == 0
    assert capsys.readouterr().out == ""


def test_a_pytorch_weight_without_transpose_exits_one_naming_both_shapes(files, capsys):
    plan, model, ckpt = files(PLAN.replace(" transpose", ""))
    assert lint(plan, "--model", model, "--checkpoint", ckpt) == 1
    out = capsys.readouterr().out
    assert ("error[P404]: tensor `model.layers.0.mlp.up_proj.weight` has shape (6, 4), but "
            "variable `layers/0/up/kernel` has shape (4, 6)") in out
    assert f"--> {plan}:5:5" in out
    assert "help: add `transpose` to this rename rule" in out


def test_a_missing_tensor_exits_one(files, capsys):
    plan, model, ckpt = files(**{"model.norm.weight": None})
    assert lint(plan, "--model", model, "--checkpoint", ckpt) == 1
    assert "error[P401]: variable `norm/scale` (4,) float32 gets no tensor" in \
        capsys.readouterr().out


def test_a_dtype_mismatch_exits_one(files, capsys):
    plan, model, ckpt = files(**{"model.norm.weight": np.zeros((4,), np.float16)})
    assert lint(plan, "--model", model, "--checkpoint", ckpt) == 1
    assert "error[P405]: tensor `model.norm.weight` is float16, but variable `norm/scale` " \
        "is float32" in capsys.readouterr().out


def test_an_extra_tensor_is_a_warning_and_an_error_under_strict(files, capsys):
    plan, model, ckpt = files(**{"lm_head.weight": np.zeros((2, 2), np.float32)})
    assert lint(plan, "--model", model, "--checkpoint", ckpt) == 0
    assert "warning[P402]: tensor `lm_head.weight`" in capsys.readouterr().out
    assert lint(plan, "--model", model, "--checkpoint", ckpt, "--strict") == 1
    assert "error[P402]: tensor `lm_head.weight`" in capsys.readouterr().out


def test_without_a_model_the_rename_rules_are_checked_against_the_names(files, capsys):
    plan, _, ckpt = files(PLAN.replace(r"layers/\1/up/kernel", "up/kernel"))
    assert lint(plan, "--checkpoint", ckpt) == 1
    out = capsys.readouterr().out
    assert ("error[P403]: tensors `model.layers.0.mlp.up_proj.weight` and "
            "`model.layers.1.mlp.up_proj.weight` are both renamed onto `up/kernel`") in out


def test_without_a_model_a_clean_checkpoint_passes(files, capsys):
    plan, _, ckpt = files()
    assert lint(plan, "--checkpoint", ckpt) == 0


def test_transpose_on_a_1d_tensor_is_found_without_a_model(files, capsys):
    plan, _, ckpt = files(PLAN.replace(r'"norm/scale"', r'"norm/scale" transpose'))
    assert lint(plan, "--checkpoint", ckpt) == 1
    assert "error[P406]: `transpose` on tensor `model.norm.weight` of shape (4,)" in \
        capsys.readouterr().out


def test_json_carries_the_checkpoint_diagnostics_with_their_fields(files, capsys):
    plan, model, ckpt = files(PLAN.replace(" transpose", ""))
    assert lint(plan, "--model", model, "--checkpoint", ckpt, "--format", "json") == 1
    doc = json.loads(capsys.readouterr().out)
    found = [d for d in doc["diagnostics"] if d["code"] == "P404"]
    assert [d["variable"] for d in found] == ["layers/0/up/kernel", "layers/1/up/kernel"]
    assert (found[0]["file"], found[0]["line"], found[0]["rule"]) == (
        plan, 5, r'"model\.layers\.(\d+)\.mlp\.up_proj\.weight"')


def test_sarif_carries_the_checkpoint_diagnostics(files, capsys):
    plan, model, ckpt = files(**{"model.norm.weight": None})
    assert lint(plan, "--model", model, "--checkpoint", ckpt, "--format", "sarif") == 1
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    # The norm rule now renames nothing, which is a warning of its own.
    assert [(r["ruleId"], r["level"]) for r in results] == [("P401", "error"),
                                                             ("P407", "warning")]
    assert "norm/scale" in results[0]["message"]["text"]


def test_github_format_carries_the_checkpoint_diagnostics(files, capsys):
    plan, model, ckpt = files(**{"model.norm.weight": None})
    assert lint(plan, "--model", model, "--checkpoint", ckpt, "--format", "github") == 1
    assert "P401" in capsys.readouterr().out


def test_a_checkpoint_that_does_not_exist_exits_two(files, tmp_path, capsys):
    plan, model, _ = files()
    assert lint(plan, "--model", model, "--checkpoint", tmp_path / "nope.safetensors") == 2
    err = capsys.readouterr().err
    assert err.startswith("planc: ") and "nope.safetensors" in err and "Traceback" not in err


def test_a_corrupt_checkpoint_is_a_diagnostic_and_exits_one(files, tmp_path, capsys):
    plan, model, _ = files()
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 8 + b"{not json")
    assert lint(plan, "--model", model, "--checkpoint", bad, "--format", "json") == 1
    (d,) = json.loads(capsys.readouterr().out)["diagnostics"]
    assert d["code"].startswith("P41") and "bad.safetensors" in d["message"]


def test_the_help_documents_checkpoint(capsys):
    with pytest.raises(SystemExit):
        main(["lint", "--help"])
    assert "--checkpoint CKPT" in capsys.readouterr().out


def test_lint_of_a_safetensors_checkpoint_loads_neither_jax_nor_keras(files):
    import subprocess
    import sys

    plan, model, ckpt = files()
    code = ("import sys\nfrom planc.cli import main\n"
            "rc = main(['lint', *sys.argv[1:]])\n"
            "print(rc, sorted(m for m in ('jax', 'keras') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code, plan, "--model", model,
                          "--checkpoint", ckpt], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0 []"


def test_a_sharded_index_is_checked_across_its_files(files, tmp_path, capsys):
    plan, model, _ = files()
    parts = {"a.safetensors": ["model.layers.0.mlp.up_proj.weight", "model.norm.weight"],
             "b.safetensors": ["model.layers.1.mlp.up_proj.weight"]}
    every = tensors(**{"model.norm.weight": np.zeros((5,), np.float32)})
    for file, names in parts.items():
        save_file({n: every[n] for n in names}, str(tmp_path / file))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": {
        n: file for file, names in parts.items() for n in names}}))
    assert lint(plan, "--model", model, "--checkpoint", index, "--format", "json") == 1
    (d,) = json.loads(capsys.readouterr().out)["diagnostics"]
    assert (d["code"], d["variable"]) == ("P404", "norm/scale")

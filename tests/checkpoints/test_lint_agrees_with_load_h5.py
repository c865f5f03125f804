"""`planc lint --checkpoint` and `plan.load` read a Keras `.weights.h5` through one
binding: a file Keras's `save_weights` wrote for a keras-hub backbone lints clean where it
loads, and a file of another configuration gets the same codes from both (issue 26,
item 2)."""

import json

import numpy as np
import pytest

import planc
from planc.cli import main

from conftest import PLANS

BUILDER = '''
import keras, keras_hub

def build(intermediate_dim):
    keras.utils.set_random_seed(0)
    return keras_hub.models.LlamaBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=4, num_key_value_heads=2,
        hidden_dim=16, intermediate_dim=intermediate_dim)

def llama():
    return build(32)

def wider():
    return build(64)
'''


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A directory holding `h5_llama_models.py` (the builders), made current, as a user
    runs `planc lint --model h5_llama_models:llama` beside their model code."""
    (tmp_path / "h5_llama_models.py").write_text(BUILDER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _saved(workdir, builder: str):
    import h5_llama_models

    model = getattr(h5_llama_models, builder)()
    path = workdir / f"{builder}.weights.h5"
    model.save_weights(path)
    return model, str(path)


def _lint(model: str, ckpt: str, capsys, *extra):
    code = main(["lint", "--color", "never", "--format", "json", str(PLANS / "keras_hub_llama.kd"),
                 "--model", model, "--checkpoint", ckpt, *extra])
    return code, json.loads(capsys.readouterr().out)["diagnostics"]


def test_a_keras_hub_save_weights_file_lints_clean_and_loads(workdir, capsys):
    source, ckpt = _saved(workdir, "llama")
    code, diags = _lint("h5_llama_models:llama", ckpt, capsys, "--strict", "--devices", "8")
    assert code == 0, diags
    assert not [d for d in diags if d["code"].startswith("P4")]
    import h5_llama_models

    plan = planc.load_plan(PLANS / "keras_hub_llama.kd")
    with plan.activate():
        target = h5_llama_models.llama()
    for v in target.variables:
        v.assign(np.zeros(v.shape, v.dtype))
    plan.load(ckpt, like=target, strict=True)
    for a, b in zip(source.variables, target.variables):
        np.testing.assert_array_equal(np.asarray(b.value), np.asarray(a.value), err_msg=a.path)


def test_lint_and_load_refuse_a_file_of_another_configuration_with_the_same_codes(workdir,
                                                                                   capsys):
    _, ckpt = _saved(workdir, "wider")
    code, diags = _lint("h5_llama_models:llama", ckpt, capsys)
    assert code == 1
    linted = sorted((d["code"], d.get("variable")) for d in diags if d["code"].startswith("P4"))
    assert linted and {c for c, _ in linted} == {"P404"}
    import h5_llama_models

    plan = planc.load_plan(PLANS / "keras_hub_llama.kd")
    with plan.activate():
        target = h5_llama_models.llama()
    with pytest.raises(planc.PlanError) as info:
        plan.load(ckpt, like=target)
    loaded = sorted((d.code, d.variable) for d in info.value.diagnostics
                    if d.code.startswith("P4"))
    assert loaded == linted


def test_rename_hints_name_only_tensors_of_the_variables_shape(tmp_path, plan_file, capsys):
    """A P401/P402 did-you-mean pairs a variable with a tensor that could fill it."""
    from safetensors.numpy import save_file

    ckpt = tmp_path / "m.safetensors"
    save_file({"block_0/up/w": np.zeros((4, 8), np.float32),
               "block_0/down/w": np.zeros((8, 4), np.float32)}, str(ckpt))
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"path": "block_0/up/kernel", "shape": [4, 6], "dtype": "float32"},
        {"path": "block_0/down/kernel", "shape": [6, 4], "dtype": "float32"}]}))
    plan = plan_file("mesh(batch = 2)\ndata_parallel\n")
    assert main(["lint", "--format", "json", str(plan), "--model", str(model),
                 "--checkpoint", str(ckpt)]) == 1
    diags = json.loads(capsys.readouterr().out)["diagnostics"]
    helps = [h for d in diags for h in d.get("help", []) if "did you mean" in h
             or "rename this tensor" in h]
    assert helps == []  # no tensor has a shape either variable could take


def test_a_keras_weights_file_against_a_manifest_is_one_p425_saying_use_the_keras_model(
        workdir, capsys):
    _, ckpt = _saved(workdir, "llama")
    assert main(["inspect", "h5_llama_models:llama", "-o", "llama.json"]) == 0
    capsys.readouterr()
    code, diags = _lint("llama.json", ckpt, capsys, "--devices", "8")
    assert code == 1
    codes = [d["code"] for d in diags]
    assert "P425" in codes and "P401" not in codes and "P402" not in codes
    [d] = [d for d in diags if d["code"] == "P425"]
    assert "--model module:attr" in " ".join(d["help"])

"""`plan.from_preset`, `planc lint --checkpoint PRESET` and `planc inspect PRESET` on tiny
keras-hub backbones (Gemma, Llama, Qwen, Qwen3-MoE) saved by keras-hub's own
``save_to_preset``, whole and in parts, on 8 simulated devices; and the presets refused."""

from __future__ import annotations

import json
import os
import shutil

import h5py
import jax
import keras
import keras_hub
import numpy as np
import pytest

import planc
from planc.cli import main
from planc.diagnostics import PlanError

PLAN = r'''
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
  ".*token_embedding/embeddings" -> (model, batch)
  ".*kernel"                     -> (..., batch, model) | (..., model) | replicated
  default                        -> (batch, ...) | replicated
}
'''

BACKBONES = {
    "gemma": lambda: keras_hub.models.GemmaBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=2, num_key_value_heads=1,
        hidden_dim=16, intermediate_dim=32, head_dim=8),
    "llama": lambda: keras_hub.models.LlamaBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=2, num_key_value_heads=1,
        hidden_dim=16, intermediate_dim=32),
    "qwen": lambda: keras_hub.models.QwenBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=2, num_key_value_heads=1,
        hidden_dim=16, intermediate_dim=32),
    "qwen3_moe": lambda: keras_hub.models.Qwen3MoeBackbone(
        vocabulary_size=64, num_layers=2, num_query_heads=2, num_key_value_heads=1,
        hidden_dim=16, intermediate_dim=32, moe_intermediate_dim=16, num_experts=4,
        head_dim=8, top_k=2),
}


@pytest.fixture(scope="module")
def plan():
    return planc.loads(PLAN, file="preset.kd")


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """`{name: (backbone, preset directory)}`, each saved by keras-hub's save_to_preset
    with no distribution, plus "gemma_parts": Gemma saved in several parts."""
    out = {}
    for name, build in BACKBONES.items():
        keras.utils.set_random_seed(7)
        model = build()
        directory = tmp_path_factory.mktemp(name)
        model.save_to_preset(str(directory))
        out[name] = (model, str(directory))
    model = out["gemma"][0]
    directory = tmp_path_factory.mktemp("gemma_parts")
    # About 4 KB a part: keras-hub writes model.weights.json and several .weights.h5.
    model.save_to_preset(str(directory), max_shard_size=4e-6)
    out["gemma_parts"] = (model, str(directory))
    return out


def copy_of(presets, tmp_path, name="gemma"):
    target = tmp_path / f"{name}_copy"
    shutil.copytree(presets[name][1], target)
    return target


def weights_linked_from_outside(presets, tmp_path):
    """A copy of the preset whose weights file is a link to one beside it."""
    directory = copy_of(presets, tmp_path)
    outside = tmp_path / "elsewhere.weights.h5"
    os.replace(directory / "model.weights.h5", outside)
    os.symlink(outside, directory / "model.weights.h5")
    return directory


def inputs():
    return {"token_ids": np.array([[1, 5, 9, 3], [2, 4, 6, 8]], "int32"),
            "padding_mask": np.ones((2, 4), "int32")}


@pytest.mark.parametrize("name", [*BACKBONES, "gemma_parts"])
def test_preset_loads_into_the_plans_layouts_with_equal_values(plan, presets, name):
    source, directory = presets[name]
    model = plan.from_preset(type(source), directory)

    # Positions, not paths: Keras numbers unnamed sublayers from a process-wide counter
    # (`qwen3_sparse_moe_block_2`), so a second build may name them differently.
    assert len(model.variables) == len(source.variables)
    placement = plan.shardings({v.path: jax.ShapeDtypeStruct(v.shape, v.dtype)
                                for v in model.variables})
    for v, w in zip(model.variables, source.variables):
        np.testing.assert_array_equal(np.asarray(v.value), np.asarray(w.value),
                                      err_msg=v.path)
        assert v.value.sharding.is_equivalent_to(placement[v.path], len(v.shape)), v.path
        assert v._layout is not None, v.path  # Keras lays out later assignments too
    split = [v.path for v in model.variables if not v.value.sharding.is_fully_replicated]
    assert len(split) >= len(model.variables) // 2
    if name == "gemma":  # one forward pass is enough to show the layers hold the values
        np.testing.assert_allclose(np.asarray(model(inputs())),
                                   np.asarray(source(inputs())), rtol=1e-5, atol=1e-5)


def test_parts_preset_is_the_one_keras_hub_writes_for_a_large_model(presets):
    directory = presets["gemma_parts"][1]
    parts = [f for f in os.listdir(directory) if f.endswith(".weights.h5")]
    assert "model.weights.json" in os.listdir(directory) and len(parts) > 2
    assert "model.weights.h5" not in parts


def test_no_variable_is_left_for_keras_to_initialise(plan, presets):
    from keras.src.backend.common import global_state

    source, directory = presets["llama"]
    model = plan.from_preset(keras_hub.models.Backbone, directory)
    pending = global_state.get_global_attribute("uninitialized_variables") or []
    ours = {id(v) for v in model.variables}
    assert not [v for v in pending if id(v) in ours]
    # Training steps assign new values through the layouts the plan gave.
    kernel = next(v for v in model.variables if v.path.endswith("ffw_linear/kernel")
                  or v.path.endswith("feedforward_output_dense/kernel"))
    kernel.assign(np.zeros(kernel.shape, kernel.dtype))
    assert kernel.value.sharding.spec == plan.partition_spec(kernel.path, kernel.shape)


def new_arrays(before):
    """Arrays (not scalars: a build makes a few constants) created since `before`."""
    return [a for a in jax.live_arrays() if a.ndim and id(a) not in before]


def codes(excinfo):
    return [d.code for d in excinfo.value.diagnostics if d.is_error]


def rewrite(preset_dir, dataset, value=None):
    """The preset's model.weights.h5 with `dataset` removed, or replaced by `value`."""
    with h5py.File(os.path.join(preset_dir, "model.weights.h5"), "r+") as f:
        del f[dataset]
        if value is not None:
            f.create_dataset(dataset, data=value)


def first_kernel_dataset(preset_dir):
    found = []
    with h5py.File(os.path.join(preset_dir, "model.weights.h5"), "r") as f:
        f.visititems(lambda n, o: found.append(n) if isinstance(o, h5py.Dataset)
                     and len(o.shape) == 2 else None)
    return found[0]


@pytest.mark.parametrize("change, code", [("missing", "P401"), ("misshaped", "P404")])
def test_missing_or_misshaped_tensor_is_refused_before_any_array_exists(
        plan, presets, tmp_path, change, code):
    directory = copy_of(presets, tmp_path)
    dataset = first_kernel_dataset(directory)
    rewrite(directory, dataset, None if change == "missing" else np.zeros((3, 5), "float32"))
    before = {id(a) for a in jax.live_arrays()}
    with pytest.raises(PlanError) as excinfo:
        plan.from_preset(keras_hub.models.GemmaBackbone, str(directory))
    assert code in codes(excinfo)
    assert new_arrays(before) == []


def test_config_naming_another_class_is_p420(plan, presets):
    with pytest.raises(PlanError) as excinfo:
        plan.from_preset(keras_hub.models.LlamaBackbone, presets["gemma"][1])
    assert codes(excinfo) == ["P420"]
    assert "GemmaBackbone" in str(excinfo.value) and "config.json" in str(excinfo.value)


def test_preset_without_weights_is_p421(plan, presets, tmp_path):
    directory = copy_of(presets, tmp_path)
    os.remove(directory / "model.weights.h5")
    with pytest.raises(PlanError) as excinfo:
        plan.from_preset(keras_hub.models.GemmaBackbone, str(directory))
    assert codes(excinfo) == ["P421"]


@pytest.mark.parametrize("config", [{"model_type": "gemma"},
                                    {"registered_name": "nobody>NoSuchBackbone",
                                     "config": {}}])
def test_config_that_is_no_keras_object_or_names_no_known_class_is_p422(
        plan, presets, tmp_path, config):
    directory = copy_of(presets, tmp_path)
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(PlanError) as excinfo:
        plan.from_preset(keras_hub.models.Backbone, str(directory))
    assert codes(excinfo) == ["P422"]


@pytest.mark.parametrize("name", ["../outside.weights.h5", "/tmp/outside.weights.h5"])
def test_parts_index_naming_a_file_outside_the_preset_is_p411(plan, presets, tmp_path,
                                                                  name):
    directory = copy_of(presets, tmp_path, "gemma_parts")
    index = json.loads((directory / "model.weights.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = name
    (directory / "model.weights.json").write_text(json.dumps(index))
    with pytest.raises(PlanError) as excinfo:
        plan.from_preset(keras_hub.models.GemmaBackbone, str(directory))
    assert codes(excinfo) == ["P411"]


def test_weights_file_linked_from_outside_the_preset_is_p411_as_a_part_would_be(
        plan, presets, plan_path, tmp_path, capsys):
    directory = weights_linked_from_outside(presets, tmp_path)
    with pytest.raises(PlanError) as excinfo:
        plan.from_preset(keras_hub.models.GemmaBackbone, str(directory))
    assert codes(excinfo) == ["P411"]
    assert main(["lint", plan_path, "--checkpoint", str(directory), "--devices", "8"]) == 1
    assert "[P411]" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["inspect"], ["lint", "PLAN", "--devices", "8", "--model"],
                                  ["lint", "PLAN", "--devices", "8", "--checkpoint"]])
def test_a_preset_whose_weights_link_outside_it_is_one_p411_in_every_command(
        presets, plan_path, tmp_path, capsys, argv):
    directory = weights_linked_from_outside(presets, tmp_path)
    assert main([plan_path if a == "PLAN" else a for a in argv] + [str(directory)]) == 1
    out = capsys.readouterr()
    shown = out.out + out.err
    assert shown.count("error[P411]: ") == 1 and "leads outside the preset" in shown
    assert "= help: keep every tensor inside the checkpoint" in shown


def test_parts_index_naming_a_missing_part_is_p412(plan, presets, tmp_path):
    directory = copy_of(presets, tmp_path, "gemma_parts")
    os.remove(directory / "model_00001.weights.h5")
    with pytest.raises(PlanError) as excinfo:
        plan.from_preset(keras_hub.models.GemmaBackbone, str(directory))
    assert codes(excinfo) == ["P412"]


def test_h5_data_stored_outside_the_file_is_p411(plan, presets, tmp_path):
    directory = copy_of(presets, tmp_path)
    dataset = first_kernel_dataset(directory)
    with h5py.File(directory / "model.weights.h5", "r+") as f:
        shape = f[dataset].shape
        del f[dataset]
        f.create_dataset(dataset, shape=shape, dtype="float32",
                         external=[(str(tmp_path / "raw.bin"), 0, h5py.h5f.UNLIMITED)])
    (tmp_path / "raw.bin").write_bytes(bytes(4 * int(np.prod(shape))))
    with pytest.raises(PlanError) as excinfo:
        plan.from_preset(keras_hub.models.GemmaBackbone, str(directory))
    assert codes(excinfo) == ["P411"]


def test_plan_leaving_a_preset_variable_unmatched_is_p301_naming_it(presets):
    plan = planc.loads('''
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout { ".*token_embedding/embeddings" -> (model, _) }
''', file="unmatched.kd")
    before = {id(a) for a in jax.live_arrays()}
    with pytest.raises(PlanError) as excinfo:
        plan.from_preset(keras_hub.models.GemmaBackbone, presets["gemma"][1])
    assert "P301" in codes(excinfo)
    assert "decoder_block_0/attention/query/kernel" in str(excinfo.value)
    assert new_arrays(before) == []


def test_a_class_without_from_preset_is_a_type_error(plan, presets):
    with pytest.raises(TypeError, match="from_preset"):
        plan.from_preset(keras.Model, presets["gemma"][1])


# -- the command line -----------------------------------------------------------------------


@pytest.fixture
def plan_path(tmp_path):
    path = tmp_path / "preset.kd"
    path.write_text(PLAN)
    return str(path)


@pytest.mark.parametrize("name", ["qwen3_moe", "gemma_parts"])
def test_lint_checks_a_preset_against_the_model_its_config_describes(
        presets, plan_path, capsys, name):
    code = main(["lint", plan_path, "--checkpoint", presets[name][1], "--devices", "8",
                 "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert not [d for d in out["diagnostics"] if d["severity"] == "error"]


def test_lint_finds_a_misshaped_tensor_of_a_preset(presets, plan_path, tmp_path, capsys):
    directory = copy_of(presets, tmp_path)
    rewrite(directory, first_kernel_dataset(directory), np.zeros((3, 5), "float32"))
    code = main(["lint", plan_path, "--checkpoint", str(directory), "--devices", "8"])
    assert code == 1
    assert "P404" in capsys.readouterr().out


@pytest.mark.parametrize("damage, code", [("weights", "P421"), ("config", "P422")])
def test_lint_of_a_damaged_preset_gives_its_code(presets, plan_path, tmp_path, capsys,
                                                 damage, code):
    directory = copy_of(presets, tmp_path)
    if damage == "weights":
        os.remove(directory / "model.weights.h5")
    else:
        (directory / "config.json").write_text(json.dumps({"registered_name": "x>Y",
                                                           "config": {}}))
    assert main(["lint", plan_path, "--checkpoint", str(directory), "--devices", "8"]) == 1
    assert f"[{code}]" in capsys.readouterr().out


def test_inspect_writes_the_manifest_of_a_preset(presets, tmp_path, capsys):
    source, directory = presets["qwen3_moe"]
    out = tmp_path / "manifest.json"
    assert main(["inspect", directory, "-o", str(out)]) == 0
    manifest = json.loads(out.read_text())
    assert [tuple(v["shape"]) for v in manifest["variables"]] == [
        tuple(v.shape) for v in source.variables]
    assert manifest["variables"][0]["path"] == "token_embedding/embeddings"

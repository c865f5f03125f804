"""`plan.load` into Keras models built under `plan.activate()`: filled in place, whole or
not at all, from files Keras itself wrote and from a Hugging Face-named checkpoint."""

import json
import os
import warnings

import jax
import keras
import numpy as np
import pytest
import safetensors.numpy

import planc
from planc.checkpoints.tensors import open_checkpoint
from planc.checkpoints.sharded import load as load_module
from planc.checkpoints.sharded.load import CheckpointWarning

PLAN = r'''
mesh(batch = auto, model = 4)
model_parallel(batch = batch)
layout {
  ".*embedding/embeddings" -> (model, _)
  ".*dense\w*/kernel" -> (_, model)
  default -> replicated
}
'''


@pytest.fixture(scope="module")
def plan():
    return planc.loads(PLAN, file="keras_load.kd")


def build(plan, seed):
    keras.utils.set_random_seed(seed)
    with plan.activate():
        inputs = keras.Input((6,), dtype="int32")
        x = keras.layers.Embedding(32, 8, name="embedding")(inputs)
        x = keras.layers.Dense(16, name="dense_up")(x)
        x = keras.layers.LayerNormalization(name="norm")(x)
        outputs = keras.layers.Dense(8, name="dense_down")(x)
        model = keras.Model(inputs, outputs, name="tiny")
    return model


def values(model):
    return {v.path: np.asarray(v.value) for v in model.variables}


def assert_laid_out_by_plan(plan, model):
    placement = plan.shardings({v.path: jax.ShapeDtypeStruct(v.shape, v.dtype)
                                for v in model.variables})
    for v in model.variables:
        assert v.value.sharding.is_equivalent_to(placement[v.path], len(v.shape)), v.path


def test_weights_h5_written_by_keras_save_weights_fills_the_model(tmp_path, plan):
    source = build(plan, seed=1)
    path = tmp_path / "tiny.weights.h5"
    source.save_weights(path)
    model = build(plan, seed=2)
    assert any(not np.array_equal(a, values(source)[p]) for p, a in values(model).items())
    assert plan.load(path, like=model) is model
    for p, value in values(source).items():
        np.testing.assert_array_equal(values(model)[p], value)
    assert_laid_out_by_plan(plan, model)


def test_a_model_is_mapped_onto_the_datasets_keras_wrote_for_it(tmp_path, plan):
    import h5py

    source = build(plan, seed=1)
    path = tmp_path / "tiny.weights.h5"
    source.save_weights(path)
    # Keras names a functional model's layers by class and position, not by layer name:
    # the second Dense layer ("dense_down") is stored as layers/dense_1.
    with h5py.File(path) as f:
        stored = np.asarray(f["layers/dense_1/vars/0"])
    model = build(plan, seed=3)
    plan.load(path, like=model)
    np.testing.assert_array_equal(np.asarray(model.get_layer("dense_down").kernel.value),
                                  stored)


def test_h5_datasets_are_read_as_slices(tmp_path, plan):
    source = build(plan, seed=1)
    path = tmp_path / "tiny.weights.h5"
    source.save_weights(path)
    model = build(plan, seed=4)
    with open_checkpoint(path) as ckpt:
        plan.load(ckpt, like=model)
        # The sharded kernels are read once in all, each replicated variable once.
        assert ckpt.bytes_read == sum(np.asarray(v.value).nbytes for v in model.variables)


def test_optimizer_state_is_untouched_and_its_saved_slots_are_not_tensors(tmp_path, plan):
    source = build(plan, seed=1)
    source.compile(optimizer="adam", loss="mse")
    source.optimizer.build(source.trainable_variables)
    path = tmp_path / "tiny.weights.h5"
    source.save_weights(path)   # holds optimizer/vars/... beside the layers
    model = build(plan, seed=5)
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    for v in model.optimizer.variables:
        v.assign(np.full(v.shape, 3, v.dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        plan.load(path, like=model)
    assert all(np.all(np.asarray(v.value) == 3) for v in model.optimizer.variables)
    np.testing.assert_array_equal(values(model)["dense_up/kernel"],
                                  values(source)["dense_up/kernel"])


def test_a_shape_error_leaves_every_variable_untouched(tmp_path, plan):
    source = build(plan, seed=1)
    written = {v.path: np.asarray(v.value) for v in source.variables}
    written["norm/gamma"] = np.ones(15, np.float32)     # one tensor of the wrong shape
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(written, str(path))
    model = build(plan, seed=6)
    before = values(model)
    with pytest.raises(planc.PlanError) as info:
        plan.load(path, like=model)
    assert [d.code for d in info.value.errors] == ["P404"]
    after = values(model)
    for p, value in before.items():
        np.testing.assert_array_equal(after[p], value)


@pytest.mark.parametrize("batched", [True, False], ids=["small tensors batched",
                                                       "each variable shard by shard"])
def test_a_read_failure_midway_leaves_every_variable_untouched(tmp_path, plan, batched,
                                                               monkeypatch):
    if not batched:
        monkeypatch.setattr(load_module, "_BATCHED_UP_TO", -1)
    source = build(plan, seed=1)
    written = {v.path: np.asarray(v.value) for v in source.variables}
    last = source.variables[-1].path
    safetensors.numpy.save_file({p: a for p, a in written.items() if p != last},
                                str(tmp_path / "a.safetensors"))
    safetensors.numpy.save_file({last: written[last]}, str(tmp_path / "b.safetensors"))
    index = tmp_path / "m.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {
        p: "b.safetensors" if p == last else "a.safetensors" for p in written}}))
    model = build(plan, seed=7)
    before = values(model)
    ckpt = open_checkpoint(index)
    # Every header was checked; then the shard holding the last variable disappears.
    os.remove(tmp_path / "b.safetensors")
    with pytest.raises(planc.PlanError) as info:
        plan.load(ckpt, like=model)
    assert [d.code for d in info.value.errors] == ["P413"]
    # One by one, the other variables had been read; batched, the read of the batch that
    # holds them all failed.
    assert (ckpt.bytes_read > 0) is not batched
    after = values(model)
    for p, value in before.items():
        np.testing.assert_array_equal(after[p], value)


# -- a keras-hub backbone from a checkpoint with Hugging Face names ------------------------

HUB_PLAN = r'''
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
  "token_embedding/embeddings" -> (model, _)
  "token_embedding/reverse_embeddings" -> (_, model)
  ".*/self_attention/(query|key|value)/kernel" -> (_, model, _)
  ".*/self_attention/attention_output/kernel" -> (model, _, _)
  ".*/feedforward_(intermediate|gate)_dense/kernel" -> (_, model)
  ".*/feedforward_output_dense/kernel" -> (model, _)
  default -> replicated
}
rename {
  "model\.embed_tokens\.weight" -> "token_embedding/embeddings"
  "lm_head\.weight" -> "token_embedding/reverse_embeddings" transpose
  "model\.layers\.(\d+)\.self_attn\.q_proj\.weight" -> "transformer_layer_\1/self_attention/query/kernel"
  "model\.layers\.(\d+)\.self_attn\.k_proj\.weight" -> "transformer_layer_\1/self_attention/key/kernel"
  "model\.layers\.(\d+)\.self_attn\.v_proj\.weight" -> "transformer_layer_\1/self_attention/value/kernel"
  "model\.layers\.(\d+)\.self_attn\.o_proj\.weight" -> "transformer_layer_\1/self_attention/attention_output/kernel"
  "model\.layers\.(\d+)\.mlp\.up_proj\.weight" -> "transformer_layer_\1/feedforward_intermediate_dense/kernel" transpose
  "model\.layers\.(\d+)\.mlp\.gate_proj\.weight" -> "transformer_layer_\1/feedforward_gate_dense/kernel" transpose
  "model\.layers\.(\d+)\.mlp\.down_proj\.weight" -> "transformer_layer_\1/feedforward_output_dense/kernel" transpose
  "model\.layers\.(\d+)\.input_layernorm\.weight" -> "transformer_layer_\1/self_attention_layernorm/scale"
  "model\.layers\.(\d+)\.post_attention_layernorm\.weight" -> "transformer_layer_\1/feedforward_layernorm/scale"
  "model\.norm\.weight" -> "sequence_output_layernorm/scale"
}
'''

# keras-hub's attention kernels are 3-D ([hidden, heads, head_dim]); `transpose` is for
# 2-D weights, so this checkpoint stores them in that shape (as a converted checkpoint
# does) and renames q/k/v/o onto query/key/value/attention_output by name alone; the
# 2-D MLP and output weights are PyTorch [out, in] and load through `transpose`.
_ATTENTION = {"q": "query", "k": "key", "v": "value", "o": "attention_output"}


def hub_backbone(plan, seed):
    import keras_hub

    keras.utils.set_random_seed(seed)
    with plan.activate():
        return keras_hub.models.LlamaBackbone(
            vocabulary_size=64, num_layers=2, num_query_heads=4, hidden_dim=16,
            intermediate_dim=32, num_key_value_heads=2, tie_word_embeddings=False)


def hf_checkpoint(model) -> dict:
    """The model's weights under Hugging Face Llama names, 2-D ones as [out, in]."""
    v = {var.path: np.asarray(var.value) for var in model.variables}
    out = {"model.embed_tokens.weight": v["token_embedding/embeddings"],
           "lm_head.weight": v["token_embedding/reverse_embeddings"].T,
           "model.norm.weight": v["sequence_output_layernorm/scale"]}
    for i in range(2):
        layer = f"transformer_layer_{i}"
        for hf, name in _ATTENTION.items():
            out[f"model.layers.{i}.self_attn.{hf}_proj.weight"] = \
                v[f"{layer}/self_attention/{name}/kernel"]
        for hf, name in [("up", "intermediate"), ("gate", "gate"), ("down", "output")]:
            out[f"model.layers.{i}.mlp.{hf}_proj.weight"] = \
                v[f"{layer}/feedforward_{name}_dense/kernel"].T
        out[f"model.layers.{i}.input_layernorm.weight"] = \
            v[f"{layer}/self_attention_layernorm/scale"]
        out[f"model.layers.{i}.post_attention_layernorm.weight"] = \
            v[f"{layer}/feedforward_layernorm/scale"]
    return {k: np.ascontiguousarray(a) for k, a in out.items()}


def test_keras_hub_backbone_fills_from_a_hugging_face_named_checkpoint(tmp_path):
    plan = planc.loads(HUB_PLAN, file="hub.kd")
    source = hub_backbone(plan, seed=1)
    written = hf_checkpoint(source)
    path = tmp_path / "model.safetensors"
    safetensors.numpy.save_file(written, str(path))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {n: "model.safetensors" for n in written}}))
    model = hub_backbone(plan, seed=2)
    assert not np.array_equal(values(model)["transformer_layer_0/feedforward_gate_dense/kernel"],
                              values(source)["transformer_layer_0/feedforward_gate_dense/kernel"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointWarning)
        assert plan.load(index, like=model, strict=True) is model
    for p, value in values(source).items():
        np.testing.assert_array_equal(values(model)[p], value, err_msg=p)
    assert_laid_out_by_plan(plan, model)


def test_bfloat16_variables_load_from_the_raw_values_keras_stores(tmp_path, plan):
    def bf16_model(seed):
        keras.utils.set_random_seed(seed)
        with plan.activate():
            return keras.Sequential([keras.Input((8,)),
                                     keras.layers.Dense(16, dtype="bfloat16", name="dense_a")],
                                    name="bf16")

    source = bf16_model(1)
    path = tmp_path / "bf16.weights.h5"
    source.save_weights(path)
    model = bf16_model(2)
    plan.load(path, like=model)
    for p, value in values(source).items():
        assert values(model)[p].dtype == value.dtype
        np.testing.assert_array_equal(values(model)[p], value)
    assert_laid_out_by_plan(plan, model)

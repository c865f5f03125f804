"""`plan.load`: checkpoints written by their own libraries, put on the plan's mesh.

Every file here is written by the library that owns its format (safetensors, numpy,
Keras's `save_weights`); every array is compared with the values written and with the
sharding the plan gives its path.
"""

import json
import warnings

import jax
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
  "layers/\d+/q/kernel" -> (_, model)
  "layers/\d+/up/kernel" -> (model, _)
  "embed" -> (batch, model)
  default -> replicated
}
rename {
  "model\.layers\.(\d+)\.q\.weight" -> "layers/\1/q/kernel" transpose
  "model\.layers\.(\d+)\.up\.weight" -> "layers/\1/up/kernel"
  "model\.embed\.weight" -> "embed"
  "model\.norm\.weight" -> "norm/scale"
}
'''


def tensors(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "model.layers.0.q.weight": rng.standard_normal((16, 8)).astype(np.float32),
        "model.layers.0.up.weight": rng.standard_normal((8, 12)).astype(np.float32),
        "model.embed.weight": rng.standard_normal((32, 8)).astype(np.float32),
        "model.norm.weight": rng.standard_normal((8,)).astype(np.float32),
    }


def expected(written):
    return {
        "layers/0/q/kernel": written["model.layers.0.q.weight"].T,
        "layers/0/up/kernel": written["model.layers.0.up.weight"],
        "embed": written["model.embed.weight"],
        "norm/scale": written["model.norm.weight"],
    }


@pytest.fixture
def plan():
    return planc.loads(PLAN, file="load.kd")


def assert_placed(plan, arrays, want):
    """Values equal `want` and each array has the sharding the plan gives its path."""
    assert set(arrays) == set(want)
    placement = plan.shardings({p: jax.ShapeDtypeStruct(a.shape, a.dtype)
                                for p, a in want.items()})
    for path, value in want.items():
        got = arrays[path]
        np.testing.assert_array_equal(np.asarray(got), value)
        assert got.sharding.is_equivalent_to(placement[path], value.ndim), path


def test_safetensors_file_loads_renamed_and_transposed_into_the_plans_shardings(tmp_path, plan):
    written = tensors()
    path = tmp_path / "model.safetensors"
    safetensors.numpy.save_file(written, str(path))
    assert_placed(plan, plan.load(path), expected(written))


def test_sharded_index_loads_each_tensor_from_its_shard(tmp_path, plan):
    written = tensors(1)
    names = list(written)
    safetensors.numpy.save_file({n: written[n] for n in names[:2]},
                                str(tmp_path / "model-00001-of-00002.safetensors"))
    safetensors.numpy.save_file({n: written[n] for n in names[2:]},
                                str(tmp_path / "model-00002-of-00002.safetensors"))
    weight_map = {n: f"model-0000{1 if i < 2 else 2}-of-00002.safetensors"
                  for i, n in enumerate(names)}
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    assert_placed(plan, plan.load(index), expected(written))


def test_a_hugging_face_directory_loads_through_its_index(tmp_path, plan):
    written = tensors(2)
    safetensors.numpy.save_file(written, str(tmp_path / "model.safetensors"))
    assert_placed(plan, plan.load(tmp_path), expected(written))


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed], ids=["stored", "compressed"])
def test_npz_written_by_numpy_loads(tmp_path, plan, save):
    written = tensors(3)
    path = tmp_path / "model.npz"
    save(path, **written)
    assert_placed(plan, plan.load(path), expected(written))


def test_stored_npz_members_are_read_slice_by_slice(tmp_path, plan):
    written = tensors(3)
    path = tmp_path / "model.npz"
    np.savez(path, **written)
    with open_checkpoint(path) as ckpt:
        plan.load(ckpt)
        # Replicated tensors are read once per process, sharded ones once in all.
        assert ckpt.bytes_read == sum(a.nbytes for a in written.values())


def test_bfloat16_and_float8_tensors_load_with_their_dtype(tmp_path):
    import ml_dtypes

    written = {"a": np.arange(32, dtype=np.float32).reshape(4, 8).astype(ml_dtypes.bfloat16),
               "b": np.linspace(-2, 2, 32).reshape(4, 8).astype(ml_dtypes.float8_e4m3fn)}
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(written, str(path))
    plan = planc.loads('mesh(batch = auto, model = 4)\nmodel_parallel(batch = batch)\n'
                       'layout { ".*" -> (_, model) }')
    out = plan.load(path)
    for name, value in written.items():
        assert out[name].dtype == value.dtype
        np.testing.assert_array_equal(np.asarray(out[name]), value)
        assert tuple(out[name].sharding.spec) == (None, "model")


@pytest.fixture
def shard_by_shard(monkeypatch):
    """Every variable read as a large one is, shard by shard (a small one is read whole
    and batched with others: see the tests of many small tensors below)."""
    monkeypatch.setattr(load_module, "_BATCHED_UP_TO", -1)


def test_each_devices_shard_is_read_as_a_slice_never_the_whole_tensor(tmp_path,
                                                                        shard_by_shard):
    big = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file({"w": big}, str(path))
    plan = planc.loads('mesh(batch = auto, model = 8)\nmodel_parallel(batch = batch)\n'
                       'layout { "w" -> (_, model) }')
    reads = []
    with open_checkpoint(path) as ckpt:
        original = ckpt.read
        ckpt.read = lambda name, index: reads.append(index) or original(name, index)
        out = plan.load(ckpt)
        assert ckpt.bytes_read == big.nbytes
    assert sorted((i[1].start, i[1].stop) for i in reads) == [(4 * k, 4 * k + 4)
                                                               for k in range(8)]
    assert all(i[0] == slice(0, 64) for i in reads)
    np.testing.assert_array_equal(np.asarray(out["w"]), big)


def test_a_transposed_tensor_reads_each_shard_transposed(tmp_path, shard_by_shard):
    weight = np.arange(24 * 16, dtype=np.float32).reshape(24, 16)   # PyTorch [out, in]
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file({"proj.weight": weight}, str(path))
    plan = planc.loads(r'''mesh(batch = auto, model = 8)
model_parallel(batch = batch)
layout { "proj/kernel" -> (_, model) }
rename { "proj\.weight" -> "proj/kernel" transpose }''')
    reads = []
    with open_checkpoint(path) as ckpt:
        original = ckpt.read
        ckpt.read = lambda name, index: reads.append(index) or original(name, index)
        kernel = plan.load(ckpt)["proj/kernel"]
    # The kernel [16, 24] splits its columns, which are the stored tensor's rows.
    assert sorted((i[0].start, i[0].stop) for i in reads) == [(3 * k, 3 * k + 3)
                                                               for k in range(8)]
    np.testing.assert_array_equal(np.asarray(kernel), weight.T)


def test_like_an_abstract_pytree_gives_that_pytree_filled_by_path(tmp_path, plan):
    written = tensors(4)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(written, str(path))
    want = expected(written)
    like = {"layers": {"0": {"q": {"kernel": jax.ShapeDtypeStruct((8, 16), np.float32)},
                             "up": {"kernel": jax.ShapeDtypeStruct((8, 12), np.float32)}}},
            "embed": jax.ShapeDtypeStruct((32, 8), np.float32),
            "norm": {"scale": np.zeros(8, np.float32)}}
    out = plan.load(path, like)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(like)
    np.testing.assert_array_equal(np.asarray(out["layers"]["0"]["q"]["kernel"]),
                                  want["layers/0/q/kernel"])
    np.testing.assert_array_equal(np.asarray(out["norm"]["scale"]), want["norm/scale"])
    assert tuple(out["embed"].sharding.spec) == ("batch", "model")


def test_like_a_pytree_of_arrays_fills_list_indices_by_path(tmp_path):
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file({"blocks.0.w": np.ones((4, 8), np.float32),
                                 "blocks.1.w": np.full((4, 8), 2, np.float32)}, str(path))
    plan = planc.loads(r'''mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout { "blocks/\d+/w" -> (_, model) }
rename { "blocks\.(\d+)\.w" -> "blocks/\1/w" }''')
    like = {"blocks": [{"w": np.zeros((4, 8), np.float32)},
                       {"w": np.zeros((4, 8), np.float32)}]}
    out = plan.load(path, like)
    assert isinstance(out["blocks"], list)
    assert float(out["blocks"][1]["w"][0, 0]) == 2.0
    assert tuple(out["blocks"][0]["w"].sharding.spec) == (None, "model")


def test_dtype_casts_only_when_asked(tmp_path):
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file({"w": np.arange(8, dtype=np.float32).reshape(2, 4)}, str(path))
    plan = planc.loads("mesh(batch = auto)\ndata_parallel")
    like = {"w": jax.ShapeDtypeStruct((2, 4), jax.numpy.bfloat16)}
    with pytest.raises(planc.PlanError) as info:
        plan.load(path, like)
    assert [d.code for d in info.value.errors] == ["P405"]
    out = plan.load(path, like, dtype="bfloat16")
    assert out["w"].dtype == jax.numpy.bfloat16
    assert float(out["w"][1, 3]) == 7.0


def test_a_64_bit_tensor_is_refused_while_jax_would_store_it_in_32_bits(tmp_path):
    assert not jax.config.jax_enable_x64  # the default, and what the suite runs under
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file({"step": np.array([3], np.int64),
                                 "w": np.ones((8, 4), np.float32)}, str(path))
    plan = planc.loads("mesh(batch = auto)\ndata_parallel")
    with pytest.raises(planc.PlanError) as info:
        plan.load(path)
    (d,) = info.value.errors
    assert d.code == "P405" and d.variable == "step" and "int32" in d.message
    assert "jax_enable_x64" in d.help[0]


def test_a_tensor_no_variable_takes_is_a_warning_and_an_error_when_strict(tmp_path, plan):
    written = tensors(5)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file({**written, "extra": np.zeros(3, np.float32)}, str(path))
    like = {p: jax.ShapeDtypeStruct(a.shape, a.dtype) for p, a in expected(written).items()}
    with pytest.warns(CheckpointWarning, match="P402") as caught:
        plan.load(path, like)
    assert [d.code for d in caught[0].message.diagnostics] == ["P402"]
    with pytest.raises(planc.PlanError) as info:
        plan.load(path, like, strict=True)
    assert [d.code for d in info.value.errors] == ["P402"]


def test_a_clean_load_warns_nothing(tmp_path, plan):
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(tensors(), str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan.load(path)


def test_a_variable_the_layout_cannot_shard_is_refused_before_any_read(tmp_path):
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file({"w": np.zeros((4, 6), np.float32)}, str(path))
    plan = planc.loads('mesh(batch = auto, model = 4)\nmodel_parallel(batch = batch)\n'
                       'layout { "w" -> (_, model) }')
    with open_checkpoint(path) as ckpt:
        with pytest.raises(planc.PlanError) as info:
            plan.load(ckpt)
        assert ckpt.bytes_read == 0
    assert [d.code for d in info.value.errors] == ["P303"]


def test_a_replicated_tensor_is_read_once_for_every_device(tmp_path):
    norm = np.arange(16, dtype=np.float32)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file({"norm": norm}, str(path))
    plan = planc.loads("mesh(batch = auto)\ndata_parallel")
    with open_checkpoint(path) as ckpt:
        out = plan.load(ckpt)["norm"]
        assert ckpt.bytes_read == norm.nbytes
    shards = out.addressable_shards
    assert len(shards) == 8 and out.sharding.is_fully_replicated
    for s in shards:
        np.testing.assert_array_equal(np.asarray(s.data), norm)


# -- many small tensors ----------------------------------------------------------------------

def many_tensors(n, seed=0):
    """`n` small tensors of a few layers' norms, biases and small kernels, and one large."""
    rng = np.random.default_rng(seed)
    out = {"model.embed.weight": rng.standard_normal((1024, 1056)).astype(np.float32),
           "model.norm.weight": rng.standard_normal((8,)).astype(np.float32)}
    for i in range(n // 4):
        out[f"model.layers.{i}.q.weight"] = rng.standard_normal((16, 8)).astype(np.float32)
        out[f"model.layers.{i}.up.weight"] = rng.standard_normal((8, 12)).astype(np.float32)
        out[f"model.layers.{i}.norm.weight"] = rng.standard_normal((8,)).astype(np.float32)
        out[f"model.layers.{i}.bias"] = rng.standard_normal((4,)).astype(np.float32)
    return out


MANY_PLAN = PLAN.replace('  "model\\.norm\\.weight" -> "norm/scale"\n',
                         '  "model\\.norm\\.weight" -> "norm/scale"\n'
                         '  "model\\.layers\\.(\\d+)\\.(norm\\.weight|bias)" -> "layers/\\1/\\2"\n')


def test_many_small_tensors_load_as_they_load_one_by_one(tmp_path, monkeypatch):
    written = many_tensors(400)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(written, str(path))
    plan = planc.loads(MANY_PLAN)
    batched = plan.load(path)
    monkeypatch.setattr(load_module, "_BATCHED_UP_TO", -1)
    one_by_one = plan.load(path)
    assert list(batched) == list(one_by_one) and len(batched) == len(written)
    for name, array in batched.items():
        assert array.sharding == one_by_one[name].sharding
        np.testing.assert_array_equal(np.asarray(array), np.asarray(one_by_one[name]))
    np.testing.assert_array_equal(np.asarray(batched["layers/7/q/kernel"]),
                                  written["model.layers.7.q.weight"].T)
    assert tuple(batched["layers/7/q/kernel"].sharding.spec) == (None, "model")


def loading_many_tensors(tmp_path):
    """The bytes `load` reads of a file of 40 tensors under MANY_PLAN, and the tensors'."""
    written = many_tensors(40)
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(written, str(path))
    with open_checkpoint(path) as ckpt:
        planc.loads(MANY_PLAN).load(ckpt)
        return ckpt.bytes_read, sum(a.nbytes for a in written.values())


def test_small_tensors_are_read_whole_each_once(tmp_path):
    read, size = loading_many_tensors(tmp_path)
    assert read == size


def test_a_truncated_shard_among_ten_thousand_tensors_is_refused_naming_it(tmp_path):
    written = many_tensors(10_000)
    names = list(written)
    weight_map = {}
    for k in range(4):
        part = {n: written[n] for n in names[k::4]}
        safetensors.numpy.save_file(part, str(tmp_path / f"s{k}.safetensors"))
        weight_map.update({n: f"s{k}.safetensors" for n in part})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": weight_map}))
    damaged = tmp_path / "s2.safetensors"
    damaged.write_bytes(damaged.read_bytes()[:-100])
    with pytest.raises(planc.PlanError) as info:
        planc.loads(MANY_PLAN).load(index)
    (diag,) = info.value.diagnostics
    assert diag.code == "P410" and "shard 's2.safetensors': truncated file: `model." \
        in diag.message


def test_a_file_cut_short_after_its_header_was_read_is_refused_naming_the_tensor(tmp_path):
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(many_tensors(400), str(path))
    with open_checkpoint(path) as ckpt:
        with open(path, "r+b") as f:  # the file changes under the loader
            f.truncate(path.stat().st_size // 2)
        with pytest.raises(planc.PlanError) as info:
            planc.loads(MANY_PLAN).load(ckpt)
    (diag,) = info.value.diagnostics
    assert diag.code == "P413" and f"{path}: tensor `model." in diag.message

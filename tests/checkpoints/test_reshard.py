"""`planc reshard SRC -o DST --plan PLAN`, end to end in a subprocess: safetensors, index
and Orbax in, Orbax out in the plan's layout; bad input refused with nothing written."""

import json
import os
import subprocess
import sys

import numpy as np
import orbax.checkpoint.experimental.v1 as ocp
import pytest
from safetensors.numpy import save_file

from planc.checkpoints.tensors import open_checkpoint

# A PyTorch-style checkpoint: [out, in] weights that the plan renames and transposes.
TORCH_PLAN = r"""
mesh(batch = 2, tp = 4)
model_parallel(batch = batch)
rename {
  "model\.layers\.(\d+)\.proj\.weight" -> "layers/\1/kernel" transpose
  "model\.embed\.weight" -> "embed"
}
layout {
  "layers/.*/kernel" -> (_, tp)
  "embed" -> (tp, batch)
}
"""
# Another layout for the same names, on a mesh with `auto`.
OTHER_PLAN = """
mesh(data = auto, model = 2)
model_parallel(batch = data)
layout {
  "layers/.*/kernel" -> (model, data)
  "embed" -> (data, _)
}
"""


def torch_tensors():
    rng = np.random.default_rng(0)
    return {"model.layers.0.proj.weight": rng.standard_normal((16, 8)).astype(np.float32),
            "model.layers.1.proj.weight": rng.standard_normal((16, 16)).astype(np.float32),
            "model.embed.weight": rng.standard_normal((32, 16)).astype(np.float32)}


def expected():
    t = torch_tensors()
    return {"layers/0/kernel": t["model.layers.0.proj.weight"].T,
            "layers/1/kernel": t["model.layers.1.proj.weight"].T,
            "embed": t["model.embed.weight"]}


def reshard(*args):
    return subprocess.run([sys.executable, "-m", "planc", "reshard", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file(torch_tensors(), str(path))
    return path


def values(directory):
    checkpoint = open_checkpoint(directory)
    return {t.name: checkpoint.read(t.name, (slice(None),) * len(t.shape))
            for t in checkpoint.tensors}


def layout(directory):
    """{name: (mesh shape, partition spec)} as Orbax recorded the shards it wrote."""
    tree = ocp.metadata(os.path.abspath(directory)).metadata
    out = {}
    for group, leaves in (("layers", tree["layers"]), ("embed", {"": tree["embed"]})):
        items = leaves.items() if isinstance(leaves, dict) else enumerate(leaves)
        for key, leaf in items:
            if group == "layers":
                leaf, key = leaf["kernel"], f"layers/{key}/kernel"
            else:
                key = "embed"
            meta = leaf.sharding_metadata
            out[key] = (dict(zip(meta.axis_names, map(int, meta.shape))),
                        tuple(meta.partition_spec))
    return out


def assert_equal_values(directory):
    got, want = values(directory), expected()
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


# -- what it writes ---------------------------------------------------------------------

def test_safetensors_become_an_orbax_checkpoint_in_the_plans_layout(src, plan_file, tmp_path):
    plan = plan_file(TORCH_PLAN)
    result = reshard(src, "-o", tmp_path / "out", "--plan", plan)
    assert result.returncode == 0, result.stderr
    assert_equal_values(tmp_path / "out")
    mesh = {"batch": 2, "tp": 4}
    assert layout(tmp_path / "out") == {"layers/0/kernel": (mesh, (None, "tp")),
                                        "layers/1/kernel": (mesh, (None, "tp")),
                                        "embed": (mesh, ("tp", "batch"))}
    with open(tmp_path / "out" / "_CHECKPOINT_METADATA", encoding="utf-8") as f:
        record = json.load(f)["custom_metadata"]["planc"]
    assert record["plan"] == "plan" and record["text"] == TORCH_PLAN


def test_an_orbax_checkpoint_is_resharded_under_another_plan_with_one_note(
        src, plan_file, tmp_path):
    first = reshard(src, "-o", tmp_path / "a", "--plan", plan_file(TORCH_PLAN, "torch.kd"))
    assert first.returncode == 0, first.stderr
    result = reshard(tmp_path / "a", "-o", tmp_path / "b", "--plan",
                     plan_file(OTHER_PLAN, "other.kd"), "--devices", "4")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("note[P417]") == 1
    assert "plan `torch`" in result.stderr and "plan `other`" in result.stderr
    assert_equal_values(tmp_path / "b")
    mesh = {"data": 2, "model": 2}
    assert layout(tmp_path / "b")["layers/1/kernel"] == (mesh, ("model", "data"))
    assert layout(tmp_path / "b")["embed"] == (mesh, ("data", None))


def test_a_sharded_index_is_read_shard_file_by_shard_file(plan_file, tmp_path):
    tensors = torch_tensors()
    names = sorted(tensors)
    save_file({n: tensors[n] for n in names[:1]}, str(tmp_path / "m-1.safetensors"))
    save_file({n: tensors[n] for n in names[1:]}, str(tmp_path / "m-2.safetensors"))
    index = {"metadata": {}, "weight_map": {n: "m-1.safetensors" if n in names[:1]
                                            else "m-2.safetensors" for n in names}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    result = reshard(tmp_path / "model.safetensors.index.json", "-o", tmp_path / "out",
                     "--plan", plan_file(TORCH_PLAN))
    assert result.returncode == 0, result.stderr
    assert_equal_values(tmp_path / "out")


def test_resharding_under_the_saving_plan_gives_no_note(src, plan_file, tmp_path):
    plan = plan_file(TORCH_PLAN)
    assert reshard(src, "-o", tmp_path / "a", "--plan", plan).returncode == 0
    result = reshard(tmp_path / "a", "-o", tmp_path / "b", "--plan", plan)
    assert result.returncode == 0, result.stderr
    assert "P417" not in result.stderr


# -- bad input: a diagnostic, an exit code, and no DST ------------------------------------

def test_a_missing_source_exits_2(plan_file, tmp_path):
    result = reshard(tmp_path / "nope.safetensors", "-o", tmp_path / "out", "--plan",
                     plan_file(TORCH_PLAN))
    assert result.returncode == 2
    assert "nope.safetensors" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_existing_destination_is_never_overwritten(src, plan_file, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    result = reshard(src, "-o", tmp_path / "out", "--plan", plan_file(TORCH_PLAN))
    assert result.returncode == 2 and "never overwrites" in result.stderr
    assert os.listdir(tmp_path / "out") == ["keep.txt"]


def test_a_plan_with_errors_exits_1_with_its_diagnostics(src, plan_file, tmp_path):
    result = reshard(src, "-o", tmp_path / "out", "--plan",
                     plan_file("mesh(tp = 4)\nmodel_parallel(batch = nope)\n"))
    assert result.returncode == 1 and "error[" in result.stderr and "plan.kd:2" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_layout_that_does_not_fit_a_tensor_exits_1_before_reading(src, plan_file, tmp_path):
    plan = plan_file(TORCH_PLAN.replace('"embed" -> (tp, batch)', '"embed" -> (_, tp)')
                     .replace("tp = 4", "tp = 3"), "bad.kd")
    result = reshard(src, "-o", tmp_path / "out", "--plan", plan, "--devices", "6")
    assert result.returncode == 1 and "P303" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_mesh_with_auto_needs_devices(src, plan_file, tmp_path):
    result = reshard(src, "-o", tmp_path / "out", "--plan", plan_file(OTHER_PLAN))
    assert result.returncode == 2 and "--devices" in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_orbax_directory_without_metadata_exits_1_naming_it(src, plan_file, tmp_path):
    plan = plan_file(TORCH_PLAN)
    assert reshard(src, "-o", tmp_path / "a", "--plan", plan).returncode == 0
    os.remove(tmp_path / "a" / "state" / "_METADATA")
    result = reshard(tmp_path / "a", "-o", tmp_path / "b", "--plan", plan)
    assert result.returncode == 1 and "error[P415]" in result.stderr
    assert str(tmp_path / "a") in result.stderr
    assert not (tmp_path / "b").exists()


def test_names_that_cannot_form_one_tree_are_refused(plan_file, tmp_path):
    save_file({"a": np.zeros(4, np.float32), "a.b": np.zeros(4, np.float32)},
              str(tmp_path / "m.safetensors"))
    plan = plan_file('mesh(batch = 1)\ndata_parallel\nrename { "a\\.b" -> "a/b" }\n')
    result = reshard(tmp_path / "m.safetensors", "-o", tmp_path / "out", "--plan", plan)
    assert result.returncode == 1 and "error[P418]" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_truncated_source_exits_1_and_leaves_no_partial_destination(src, plan_file, tmp_path):
    data = src.read_bytes()
    src.write_bytes(data[:-64])  # the header is intact, the last tensor is cut short
    result = reshard(src, "-o", tmp_path / "out", "--plan", plan_file(TORCH_PLAN))
    assert result.returncode == 1, result.stderr
    assert "error[P41" in result.stderr and "Traceback" not in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["model.safetensors", "plan.kd"]


def test_a_source_that_fails_mid_write_leaves_no_partial_destination(src, plan_file, tmp_path):
    """The source is cut short after the first part was written: the read fails, and the
    partial saves already made are removed with it."""
    import jax

    import planc
    from planc.checkpoints.binding import bind_checkpoint
    from planc.checkpoints.tensors import CheckpointError
    from planc.checkpoints.sharded.orbax_save_restore import save_parts
    from planc.checkpoints.sharded.reshard import parts

    plan = planc.load_plan(plan_file(TORCH_PLAN))
    checkpoint = open_checkpoint(src)
    bound, _ = bind_checkpoint(plan.ir, checkpoint.tensors)
    shardings = plan.shardings({s.variable.path: jax.ShapeDtypeStruct(s.variable.shape,
                                                                      s.variable.dtype)
                                for s in bound}, plan.mesh())
    each = parts(plan.ir, checkpoint, bound, shardings, budget=1)  # one tensor a part

    def cut_after_first():
        yield next(each)
        assert (tmp_path / "dst" / "out.partial_save").is_dir()  # the first part is saved
        src.write_bytes(src.read_bytes()[:-256])
        yield from each

    (tmp_path / "dst").mkdir()
    with pytest.raises(CheckpointError) as caught:
        save_parts(plan.ir, cut_after_first(), tmp_path / "dst" / "out")
    assert caught.value.code == "P413"
    assert os.listdir(tmp_path / "dst") == []
